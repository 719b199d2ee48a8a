// Package fetch downloads Flatcar release images: it resolves versions through version.txt,
// verifies the clear-signed DIGESTS, and streams network -> SHA512 -> (bzip2 decode) -> output in
// one pass while keeping the verified download in a cache and an interrupted one resumable.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client does the HTTP side: timeouts, bounded retries with exponential backoff, and a stall
// timeout on bodies so a silent connection does not hang a CI job forever.
type Client struct {
	HTTP         *http.Client
	Retries      int           // further attempts after a transient failure
	Backoff      time.Duration // first wait; doubled after each failure
	StallTimeout time.Duration // a body that delivers nothing for this long is a failure
	UserAgent    string
	Logf         func(format string, a ...any)
}

// NewClient returns a client with conservative network timeouts (and none on whole bodies, which
// can take long on a slow link).
func NewClient(retries int) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 30 * time.Second
	tr.ResponseHeaderTimeout = 60 * time.Second
	return &Client{
		HTTP:         &http.Client{Transport: tr},
		Retries:      retries,
		Backoff:      500 * time.Millisecond,
		StallTimeout: 60 * time.Second,
		UserAgent:    "flatcar-capo",
		Logf:         func(string, ...any) {},
	}
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

// transient reports whether trying again may help: network errors, cut bodies, 5xx, 408 and 429.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusRequestTimeout || se.Code == http.StatusTooManyRequests
	}
	return true // connection refused/reset, timeouts, unexpected EOF, stalls
}

// backoff waits before attempt number n (1-based) or returns early when ctx ends.
func (c *Client) backoff(ctx context.Context, n int) error {
	d := c.Backoff << (n - 1)
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// request sends one GET; offset > 0 asks for the rest of the file with a Range header.
func (c *Client) request(ctx context.Context, url string, offset int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", url, err)
	}
	req.Header.Set("User-Agent", c.UserAgent)
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp, nil
}

// GetSmall downloads a small file whole (version.txt, DIGESTS.asc), retrying transient failures.
func (c *Client) GetSmall(ctx context.Context, url string, max int64) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		b, err := c.getOnce(ctx, url, max)
		if err == nil || !transient(ctx, err) || attempt > c.Retries {
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil && attempt > 1 {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			return b, err
		}
		c.Logf("%v; retrying (%d/%d)", err, attempt, c.Retries)
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

func (c *Client) getOnce(ctx context.Context, url string, max int64) ([]byte, error) {
	resp, err := c.request(ctx, url, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Status: resp.Status}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("GET %s: larger than %d bytes, not a release metadata file", url, max)
	}
	return b, nil
}

// Probe asks whether url exists with a HEAD request (retried like any other); nil means it does.
func (c *Client) Probe(ctx context.Context, url string) error {
	for attempt := 1; ; attempt++ {
		err := c.headOnce(ctx, url)
		if err == nil || !transient(ctx, err) || attempt > c.Retries {
			return err
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

func (c *Client) headOnce(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return fmt.Errorf("bad URL %q: %w", url, err)
	}
	req.Header.Set("User-Agent", c.UserAgent)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("HEAD %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &StatusError{URL: url, Code: resp.StatusCode, Status: resp.Status}
	}
	return nil
}
