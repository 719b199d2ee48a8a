package registrytest

import (
	"crypto/tls"
	"net/http"
	"path/filepath"
	"testing"
)

// FileMirror is an HTTPS file server on 127.0.0.1 with the registry's certificate (its CA is
// the registry's CAFile; GuestHostIP is in it), for the files a node downloads at first boot; it
// logs every request ("METHOD PATH").
type FileMirror struct {
	Host string // 127.0.0.1:PORT
	requestLog
}

// ServeFiles serves files (URL path -> content) over HTTPS until the test ends.
func (r *Registry) ServeFiles(t testing.TB, files map[string][]byte) *FileMirror {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(r.Dir, "server.pem"), filepath.Join(r.Dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	m := &FileMirror{}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		m.add(req.Method + " " + req.URL.Path)
		b, ok := files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(b)
	})
	m.Host = serveLoopbackTLS(t, h, &tls.Config{Certificates: []tls.Certificate{pair}})
	return m
}
