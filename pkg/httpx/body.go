package httpx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Body reads a remote file from Offset to its end, reconnecting with a Range request when the
// connection drops, so a cut mid-body costs a reconnect rather than the whole download. The
// retry budget resets whenever bytes arrive; the download deadline does not, so a trickle ends.
type Body struct {
	URL    string
	Offset int64 // absolute position of the next byte
	Total  int64 // file size, -1 until known

	c        *Client
	ctx      context.Context
	cancel   context.CancelFunc
	body     io.ReadCloser
	failures int
}

// Open starts a download of url from byte offset (what a previous run kept): the first request
// is made here, so a 404 is known before anything is written. Close the Body.
func (c *Client) Open(ctx context.Context, url string, offset int64) (*Body, error) {
	ctx, cancel := c.withDeadline(ctx, url)
	b := &Body{URL: url, Offset: offset, Total: -1, c: c, ctx: ctx, cancel: cancel}
	for {
		err := b.open()
		if err == nil {
			return b, nil
		}
		if err = b.failed(err); err != nil {
			cancel()
			return nil, err
		}
	}
}

// failed counts a failure and waits; it returns the error to give up with, or nil to retry.
func (b *Body) failed(err error) error {
	if b.ctx.Err() != nil {
		return ended(b.ctx, b.Offset)
	}
	if !transient(b.ctx, err) {
		return err
	}
	b.failures++
	if b.failures > b.c.o.Retries {
		return &DroppedError{URL: b.URL, Got: b.Offset, Total: b.Total, Attempts: b.failures, Err: err}
	}
	msg := err.Error()
	if !strings.Contains(msg, b.URL) {
		msg = b.URL + ": " + msg
	}
	fmt.Fprintf(b.c.o.Log, "%s (at byte %d); retrying from there (%d/%d)\n", msg, b.Offset, b.failures, b.c.o.Retries)
	if err := b.c.backoff(b.ctx, b.failures); err != nil {
		return ended(b.ctx, b.Offset)
	}
	return nil
}

func (b *Body) open() error {
	resp, err := b.c.request(b.ctx, http.MethodGet, b.URL, b.Offset)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent && b.Offset > 0:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != b.Offset {
			resp.Body.Close()
			return fmt.Errorf("GET %s: server sent range %q for a request from byte %d", b.URL, resp.Header.Get("Content-Range"), b.Offset)
		}
		b.Total = total
	case resp.StatusCode == http.StatusOK:
		if resp.ContentLength >= 0 {
			b.Total = resp.ContentLength
		}
		if b.Offset > 0 { // the server ignored Range: skip what we already have
			if _, err := io.CopyN(io.Discard, resp.Body, b.Offset); err != nil {
				resp.Body.Close()
				return fmt.Errorf("GET %s: %w", b.URL, err)
			}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && b.Offset > 0:
		// Nothing after Offset: the kept bytes may be the whole file; the digest decides.
		resp.Body.Close()
		b.Total = b.Offset
		b.body = io.NopCloser(strings.NewReader(""))
		return nil
	default:
		resp.Body.Close()
		return &StatusError{URL: b.URL, Code: resp.StatusCode, Status: resp.Status}
	}
	b.body = resp.Body
	return nil
}

func (b *Body) Read(p []byte) (int, error) {
	for {
		if b.body == nil {
			if err := b.open(); err != nil {
				if err = b.failed(err); err != nil {
					return 0, err
				}
				continue
			}
		}
		n, err := b.body.Read(p)
		b.Offset += int64(n)
		if n > 0 {
			b.failures = 0
		}
		if err == nil {
			return n, nil
		}
		if err == io.EOF && (b.Total < 0 || b.Offset >= b.Total) {
			return n, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.body.Close()
		b.body = nil
		if ferr := b.failed(err); ferr != nil {
			return n, ferr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Close releases the connection and the download's deadline.
func (b *Body) Close() error {
	if b.body != nil {
		b.body.Close()
		b.body = nil
	}
	b.cancel()
	return nil
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*").
func parseContentRange(v string) (start, total int64, ok bool) {
	v, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	span, size, found := strings.Cut(v, "/")
	first, _, found2 := strings.Cut(span, "-")
	if !found || !found2 {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	total = -1
	if size != "*" {
		if total, err = strconv.ParseInt(size, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, total, true
}

// GetSmall downloads a small file whole (version.txt, DIGESTS.asc, a .sha256), retrying
// transient failures, within the stall timeout and the download deadline.
func (c *Client) GetSmall(ctx context.Context, url string, max int64) ([]byte, error) {
	return c.retried(ctx, http.MethodGet, url, max)
}

// Probe asks whether url exists with a HEAD request (retried like any other); nil means it does.
func (c *Client) Probe(ctx context.Context, url string) error {
	_, err := c.retried(ctx, http.MethodHead, url, 0)
	return err
}

// retried sends once until it succeeds, fails for good or runs out of retries. Only a GET
// logs its retries and says how many attempts it gave up after.
func (c *Client) retried(ctx context.Context, method, url string, max int64) ([]byte, error) {
	ctx, cancel := c.withDeadline(ctx, url)
	defer cancel()
	get := method == http.MethodGet
	for attempt := 1; ; attempt++ {
		b, err := c.once(ctx, method, url, max)
		if err != nil && ctx.Err() != nil {
			return nil, ended(ctx, 0)
		}
		if err == nil || !transient(ctx, err) || attempt > c.o.Retries {
			if err != nil && attempt > 1 && get {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			return b, err
		}
		if get {
			fmt.Fprintf(c.o.Log, "%v; retrying (%d/%d)\n", err, attempt, c.o.Retries)
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, ended(ctx, 0)
		}
	}
}

// once sends one GET or HEAD; a GET's body is read whole if it has at most max bytes.
func (c *Client) once(ctx context.Context, method, url string, max int64) ([]byte, error) {
	resp, err := c.request(ctx, method, url, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Status: resp.Status}
	}
	if method == http.MethodHead {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("GET %s: larger than %d bytes, not the small file expected here", url, max)
	}
	return b, nil
}
