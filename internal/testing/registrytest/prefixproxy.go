package registrytest

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PrefixProxy answers as a Harbor proxy-cache project does: /v2/<Project>/<repo>/... is the
// registry's /v2/<repo>/..., /v2/ is its API root, anything else is 404. It listens on
// 127.0.0.1 over plain HTTP and logs every request it saw.
type PrefixProxy struct {
	Host    string // 127.0.0.1:PORT
	Project string
	requestLog
}

// StartPrefixProxy runs a PrefixProxy in front of r until the test ends.
func StartPrefixProxy(t testing.TB, r *Registry, project string) *PrefixProxy {
	t.Helper()
	target, _ := url.Parse("https://" + r.Host)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool}}
	p := &PrefixProxy{Project: project}
	prefix := "/v2/" + project + "/"
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.add(req.Method + " " + req.URL.Path)
		switch {
		case req.URL.Path == "/v2/" || req.URL.Path == "/v2":
		case strings.HasPrefix(req.URL.Path, prefix):
			req.URL.Path = "/v2/" + strings.TrimPrefix(req.URL.Path, prefix)
			req.URL.RawPath = ""
		default:
			http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN","message":"not in this project"}]}`, http.StatusNotFound)
			return
		}
		req.Host = target.Host
		rp.ServeHTTP(w, req)
	})
	p.Host = serveLoopback(t, h)
	return p
}

// DockerConfigFor writes a docker config dir with the registry's login for each host (a proxy
// in front of the registry asks for the same login under its own host name).
func (r *Registry) DockerConfigFor(t testing.TB, hosts ...string) string {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(User + ":" + Password))
	var entries []string
	for _, h := range hosts {
		entries = append(entries, fmt.Sprintf("%q:{\"auth\":%q}", h, auth))
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{`+strings.Join(entries, ",")+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
