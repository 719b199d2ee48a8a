package capitest

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// startRoutes serves an HTTP CONNECT proxy on 127.0.0.1 that opens a tunnel to each address of
// routes (host:port, as the client names it: TLS is end to end, so the server's certificate is
// checked against that address) through the 127.0.0.1 address it maps to, and to nothing else.
// It stops with the test and returns its URL.
func startRoutes(t testing.TB, routes map[string]string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to, ok := routes[r.Host]
		if r.Method != http.MethodConnect || !ok {
			http.Error(w, "capitest routes only CONNECT to "+keys(routes), http.StatusForbidden)
			return
		}
		out, err := net.DialTimeout("tcp", to, 10*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		in, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			out.Close()
			return
		}
		in.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		done := make(chan struct{}, 2)
		go func() { io.Copy(out, buf); done <- struct{}{} }()
		go func() { io.Copy(in, out); done <- struct{}{} }()
		<-done
		in.Close()
		out.Close()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

func keys(m map[string]string) string {
	s := ""
	for k := range m {
		if s != "" {
			s += ", "
		}
		s += k
	}
	return s
}
