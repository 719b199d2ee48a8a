// Package httpx is the one HTTP client of flatcar-capo: every download (release files, the
// Kubernetes binaries, --sysext URLs) goes through a Client, so dial, header and stall timeouts,
// bounded retries with backoff, Range resume and a per-download deadline apply to all of them.
// Other HTTP users (a registry client) take NewTransportTLS and get the same timeouts.
package httpx

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Defaults of the network flags (--retries, --stall-timeout, --download-timeout): a mirror that
// goes silent fails a CI job in a minute, and a trickling one within the deadline.
const (
	DefaultRetries         = 3
	DefaultStallTimeout    = 60 * time.Second
	DefaultDownloadTimeout = 30 * time.Minute
	defaultBackoff         = 500 * time.Millisecond
	maxBackoff             = 30 * time.Second
	dialTimeout            = 30 * time.Second
)

// Options are the network settings of one command.
type Options struct {
	Retries         int           // further attempts after a transient failure
	StallTimeout    time.Duration // nothing received for this long (headers or body) is a failure
	DownloadTimeout time.Duration // one download, retries and resumes included, must end within this
	Backoff         time.Duration // first wait between attempts; doubled after each failure
	UserAgent       string
	Log             io.Writer // one line per retry
	CAFile          string    // --ca-file: PEM CAs trusted, on top of the system's, by every client

	caPEM []byte // CAFile's content, read by Validate
}

// Validate fills the defaults of unset fields and refuses values no download can work with
// (errs.ErrInvalid).
func (o *Options) Validate() error {
	if o.Retries < 0 {
		return errs.Invalidf("--retries must be 0 or more, not %d", o.Retries)
	}
	if o.StallTimeout < 0 || o.DownloadTimeout < 0 {
		return errs.Invalidf("--stall-timeout and --download-timeout must be positive durations such as 30s or 10m, not %s and %s", o.StallTimeout, o.DownloadTimeout)
	}
	o.StallTimeout = cmp.Or(o.StallTimeout, DefaultStallTimeout)
	o.DownloadTimeout = cmp.Or(o.DownloadTimeout, DefaultDownloadTimeout)
	o.Backoff = cmp.Or(o.Backoff, defaultBackoff)
	o.UserAgent = cmp.Or(o.UserAgent, "flatcar-capo")
	o.Log = cmp.Or(o.Log, io.Discard)
	return o.loadCA()
}

// Client downloads with the Options' timeouts and retries.
type Client struct {
	o    Options
	http *http.Client
}

// New returns a client for o (unset fields take the defaults). Callers validate user input
// with o.Validate first; New treats what it cannot use as the default.
func New(o Options) *Client {
	if o.Validate() != nil {
		o.Retries, o.StallTimeout, o.DownloadTimeout = DefaultRetries, DefaultStallTimeout, DefaultDownloadTimeout
		o.Validate()
	}
	return &Client{o: o, http: &http.Client{Transport: NewTransportTLS(o, nil)}}
}

// Options are the client's settings, defaults filled.
func (c *Client) Options() Options { return c.o }

// NewTransportTLS returns a transport with o's timeouts (no retries: a registry client brings
// its own): dialing and the TLS handshake are bounded, the response headers must come within the
// stall timeout, and a body that delivers nothing for the stall timeout fails its Read with a
// message saying so. cfg is a TLS configuration (a registry's private CA); nil keeps the default.
// --ca-file's certificates are added to its roots either way.
func NewTransportTLS(o Options, cfg *tls.Config) http.RoundTripper {
	o.Validate()
	cfg = o.trust(cfg)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		tr.TLSClientConfig = cfg
	}
	dial := min(dialTimeout, o.StallTimeout)
	tr.DialContext = (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = dial
	tr.ResponseHeaderTimeout = o.StallTimeout
	tr.OnProxyConnectResponse = CheckProxyConnect
	return GuardRedirects(&stallTransport{base: tr, timeout: o.StallTimeout})
}

// backoff waits before attempt number n (1-based) or returns early when ctx ends.
func (c *Client) backoff(ctx context.Context, n int) error {
	d := min(c.o.Backoff<<(n-1), maxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// withDeadline bounds one download of url by the download timeout; the context's cause names it.
func (c *Client) withDeadline(ctx context.Context, url string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.o.DownloadTimeout, &DeadlineError{URL: url, Timeout: c.o.DownloadTimeout})
}

// ended returns the error to stop with once ctx is done: the download's own deadline, or the
// caller's cancellation as it is (Ctrl-C stays a cancellation, exit 130).
func ended(ctx context.Context, got int64) error {
	if de, ok := context.Cause(ctx).(*DeadlineError); ok {
		e := *de
		e.Got = got
		return &e
	}
	return ctx.Err()
}

// request sends one GET; offset > 0 asks for the rest of the file with a Range header.
func (c *Client) request(ctx context.Context, method, url string, offset int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", url, err)
	}
	req.Header.Set("User-Agent", c.o.UserAgent)
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := c.http.Do(req)
	if isUntrusted(err) {
		return nil, untrusted(url, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return resp, nil
}

// StatusError is an HTTP answer other than success.
type StatusError struct {
	URL    string
	Code   int
	Status string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: server answered %s", e.URL, e.Status)
}

// IsNotFound reports whether err is a 404 (or 410) answer.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusGone)
}

// DroppedError is a download that kept failing after every retry.
type DroppedError struct {
	URL        string
	Got, Total int64
	Attempts   int
	Err        error
}

func (e *DroppedError) Error() string {
	total := "?"
	if e.Total >= 0 {
		total = strconv.FormatInt(e.Total, 10)
	}
	return fmt.Sprintf("downloading %s failed at byte %d of %s after %d attempts: %v", e.URL, e.Got, total, e.Attempts, e.Err)
}
func (e *DroppedError) Unwrap() error { return e.Err }

// DeadlineError is a download that did not finish within the download timeout, however much
// it progressed (a trickling server resets no budget here). It is not a cancellation.
type DeadlineError struct {
	URL     string
	Timeout time.Duration
	Got     int64 // bytes received when the deadline passed
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("downloading %s: not finished after %s (%d bytes received; the server is too slow or trickles): "+
		"raise --download-timeout or use a faster mirror", e.URL, e.Timeout, e.Got)
}

// errStalled marks a response that delivered nothing for the stall timeout.
var errStalled = errors.New("no data received")

// IsStalled reports whether err is a stall (no byte for the stall timeout).
func IsStalled(err error) bool { return errors.Is(err, errStalled) }

// transient reports whether trying again may help: network errors, cut bodies, 5xx, 408 and 429.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusRequestTimeout || se.Code == http.StatusTooManyRequests
	}
	if isUntrusted(err) {
		return false // the same certificate again
	}
	return true // connection refused/reset, timeouts, unexpected EOF, stalls
}
