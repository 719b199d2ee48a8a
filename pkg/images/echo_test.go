package images_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// A registry that echoes the credentials it was sent (the Authorization header's base64, the
// password URL-escaped) in a 500's error message: the pull's error names the registry and the
// status with a short excerpt, and holds neither the password nor any encoding of it.
func TestEchoingRegistryGetsNoCredentialOut(t *testing.T) {
	const user, pw = "robot", "Reg1stry/pa55+word"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodHead { // the tag resolves; the manifest's GET fails with the echo
			w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
			w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("ab", 32))
			w.Header().Set("Content-Length", "100")
			return
		}
		sent := strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"errors":[{"code":"UNKNOWN","message":"authentication backend down; you sent %s, password %s, %s"}]}`,
			sent, url.QueryEscape(pw), strings.Repeat("padding ", 5000))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfgDir)
	m, err := images.ParseMirror("registry.k8s.io=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = images.Pull(context.Background(), refs(t, "registry.k8s.io/pause:3.10"), images.Options{Arch: "amd64", CacheDir: t.TempDir(), Mirrors: images.Mirrors{m}})
	if err == nil {
		t.Fatal("no error")
	}
	t.Log(err)
	for _, s := range []string{pw, auth, url.QueryEscape(pw)} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %q", s)
		}
	}
	for _, w := range []string{host, "500", "authentication backend down"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q", w)
		}
	}
	if len(err.Error()) > 1000 {
		t.Errorf("a %d-byte message", len(err.Error()))
	}
}
