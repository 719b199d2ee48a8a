package registrytest

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"
)

// requestLog is what a test proxy was asked, in order, safe for its handler's goroutines.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) add(entry string) {
	l.mu.Lock()
	l.seen = append(l.seen, entry)
	l.mu.Unlock()
}

// Seen is every request the proxy was asked, in order.
func (l *requestLog) Seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// serveLoopback serves h on a free 127.0.0.1 port until the test ends and returns host:port.
func serveLoopback(t testing.TB, h http.Handler) string { return serveLoopbackTLS(t, h, nil) }

// serveLoopbackTLS is serveLoopback over TLS with cfg (plain HTTP when nil).
func serveLoopbackTLS(t testing.TB, h http.Handler, cfg *tls.Config) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
