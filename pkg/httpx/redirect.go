package httpx

import (
	"fmt"
	"io"
	"net/http"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// maxRedirects bounds a redirect chain in every client, whatever its CheckRedirect says:
// go-containerregistry sets its own (an SSRF check) and with it loses net/http's limit of 10,
// so a registry that redirected a blob to itself got some 6,400 requests a second until the
// build was killed.
const maxRedirects = 10

// maxErrorBody is as much of an error response's body (status 400 and up) as any client on a
// guarded transport reads: gophercloud and go-containerregistry read an error body whole into
// their errors, and a hostile or broken server can send gigabytes.
const maxErrorBody = 1 << 20

// GuardRedirects wraps base so that an error response's body ends after MaxErrorBody bytes and a redirect chain ends, with a RedirectError, at the first
// URL it has already visited (a loop) or after MaxRedirects redirects. The chain is read from
// the request itself (net/http links each redirected request to the response that caused it),
// so it works under any http.Client. One chain that fails this way is one failed attempt: a
// caller's --retries budget counts it once.
func GuardRedirects(base http.RoundTripper) http.RoundTripper {
	if _, ok := base.(redirectGuard); ok {
		return base
	}
	return redirectGuard{base}
}

type redirectGuard struct{ base http.RoundTripper }

func (g redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	hops := 0
	for r := req.Response; r != nil && r.Request != nil; r = r.Request.Response {
		hops++
		if r.Request.URL.String() == req.URL.String() {
			return nil, &redirectError{URL: req.URL.String(), First: first(req), Hops: hops, Loop: true}
		}
	}
	if hops > maxRedirects {
		return nil, &redirectError{URL: req.URL.String(), First: first(req), Hops: hops}
	}
	resp, err := g.base.RoundTrip(req)
	if err == nil && resp.StatusCode >= 400 && resp.Body != nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxErrorBody), resp.Body}
	}
	return resp, err
}

// first is the URL the chain started at.
func first(req *http.Request) string {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req.URL.String()
}

// redirectError is a redirect chain that was stopped.
type redirectError struct {
	URL, First string // where it was sent again, where the chain began
	Hops       int
	Loop       bool
}

// Error names where the chain began: net/http's *url.Error around it names the last request.
func (e *redirectError) Error() string {
	switch {
	case e.Loop && e.Hops == 1:
		return "a redirect loop (it redirects to itself); the server or mirror is misconfigured"
	case e.Loop:
		return fmt.Sprintf("a redirect loop (%d redirects from %s lead back to %s); the server or mirror is misconfigured", e.Hops, redact.URL(e.First), redact.URL(e.URL))
	}
	return fmt.Sprintf("stopped after %d redirects from %s; the server or mirror is misconfigured", maxRedirects, redact.URL(e.First))
}
