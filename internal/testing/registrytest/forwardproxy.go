package registrytest

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// ForwardProxy is an HTTP proxy on 127.0.0.1 that asks for a login (Proxy-Authorization basic
// User:Pass), sends every request for any host to To (127.0.0.1:PORT: names in the test need no
// DNS) and logs what it saw ("METHOD URL", "CONNECT host:port"). A CONNECT (an https:// URL
// through the proxy) is tunnelled to To, which then must speak TLS.
type ForwardProxy struct {
	Host       string // 127.0.0.1:PORT
	User, Pass string
	requestLog
}

// StartForwardProxy runs a ForwardProxy to the server at to until the test ends.
func StartForwardProxy(t testing.TB, to, user, pass string) *ForwardProxy {
	t.Helper()
	p := &ForwardProxy{User: user, Pass: pass}
	target := &url.URL{Scheme: "http", Host: to}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path, r.Out.URL.RawPath = r.In.URL.Path, r.In.URL.RawPath
		r.Out.Header.Del("Proxy-Authorization")
	}}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ok := req.Header.Get("Proxy-Authorization") == want
		entry := req.Method + " " + req.URL.String()
		if req.Method == http.MethodConnect {
			entry = "CONNECT " + req.Host
		}
		if !ok {
			entry += " (no proxy login)"
		}
		p.add(entry)
		if ok && req.Method == http.MethodConnect {
			tunnel(w, to)
			return
		}
		if !ok || req.URL.Host == "" || !strings.HasPrefix(req.URL.String(), "http://") {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			http.Error(w, "proxy login required", http.StatusProxyAuthRequired)
			return
		}
		rp.ServeHTTP(w, req)
	})
	p.Host = serveLoopback(t, h)
	return p
}

// tunnel answers a CONNECT: the client's connection is joined to a new one to to.
func tunnel(w http.ResponseWriter, to string) {
	out, err := net.DialTimeout("tcp", to, 10*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer out.Close()
	in, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer in.Close()
	in.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, buf); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// StartRefusingProxy runs an HTTP proxy on 127.0.0.1 that lets nothing through: every CONNECT
// and every request is answered 403 Forbidden, as an air-gapped site's proxy answers a host it
// does not allow. It logs what it saw, as ForwardProxy does.
func StartRefusingProxy(t testing.TB) *ForwardProxy {
	t.Helper()
	p := &ForwardProxy{}
	p.Host = serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		entry := req.Method + " " + req.URL.String()
		if req.Method == http.MethodConnect {
			entry = "CONNECT " + req.Host
		}
		p.add(entry)
		http.Error(w, "access denied by site policy", http.StatusForbidden)
	}))
	return p
}
