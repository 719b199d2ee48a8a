package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errStalled marks a body that delivered nothing for StallTimeout.
var errStalled = errors.New("no data received")

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

// resumableBody reads a remote file from Offset to its end, reconnecting with a Range request
// when the connection drops, so a cut mid-body costs a reconnect rather than the whole download.
// The retry budget resets whenever bytes arrive, so only failures without progress are bounded.
type resumableBody struct {
	c        *Client
	ctx      context.Context
	URL      string
	Offset   int64 // absolute position of the next byte
	Total    int64 // file size, -1 until known
	body     io.ReadCloser
	failures int
}

func newResumableBody(ctx context.Context, c *Client, url string, offset int64) *resumableBody {
	return &resumableBody{c: c, ctx: ctx, URL: url, Offset: offset, Total: -1}
}

// Open makes the first request, so that a 404 is known before anything is written, retrying
// transient failures.
func (r *resumableBody) Open() error {
	for {
		err := r.open()
		if err == nil {
			return nil
		}
		if err = r.failed(err); err != nil {
			return err
		}
	}
}

// failed counts a failure and waits; it returns the error to give up with, or nil to retry.
func (r *resumableBody) failed(err error) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if !transient(r.ctx, err) {
		return err
	}
	r.failures++
	if r.failures > r.c.Retries {
		return &DroppedError{URL: r.URL, Got: r.Offset, Total: r.Total, Attempts: r.failures, Err: err}
	}
	r.c.Logf("%s: %v at byte %d; retrying from there (%d/%d)", r.URL, err, r.Offset, r.failures, r.c.Retries)
	return r.c.backoff(r.ctx, r.failures)
}

func (r *resumableBody) open() error {
	reqCtx, cancel := context.WithCancel(r.ctx)
	resp, err := r.c.request(reqCtx, r.URL, r.Offset)
	if err != nil {
		cancel()
		return err
	}
	switch {
	case resp.StatusCode == http.StatusPartialContent && r.Offset > 0:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != r.Offset {
			resp.Body.Close()
			cancel()
			return fmt.Errorf("GET %s: server sent range %q for a request from byte %d", r.URL, resp.Header.Get("Content-Range"), r.Offset)
		}
		r.Total = total
	case resp.StatusCode == http.StatusOK:
		if resp.ContentLength >= 0 {
			r.Total = resp.ContentLength
		}
		if r.Offset > 0 { // the server ignored Range: skip what we already have
			if _, err := io.CopyN(io.Discard, resp.Body, r.Offset); err != nil {
				resp.Body.Close()
				cancel()
				return fmt.Errorf("GET %s: %w", r.URL, err)
			}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && r.Offset > 0:
		// Nothing after Offset: the kept bytes may be the whole file; the digest decides.
		resp.Body.Close()
		cancel()
		r.Total = r.Offset
		r.body = io.NopCloser(strings.NewReader(""))
		return nil
	default:
		resp.Body.Close()
		cancel()
		return &StatusError{URL: r.URL, Code: resp.StatusCode, Status: resp.Status}
	}
	r.body = newStallReader(resp.Body, cancel, r.c.StallTimeout)
	return nil
}

func (r *resumableBody) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if err := r.open(); err != nil {
				if err = r.failed(err); err != nil {
					return 0, err
				}
				continue
			}
		}
		n, err := r.body.Read(p)
		r.Offset += int64(n)
		if n > 0 {
			r.failures = 0
		}
		if err == nil {
			return n, nil
		}
		if err == io.EOF && (r.Total < 0 || r.Offset >= r.Total) {
			return n, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		r.body.Close()
		r.body = nil
		if ferr := r.failed(err); ferr != nil {
			return n, ferr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Close releases the current connection.
func (r *resumableBody) Close() error {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
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

// stallReader cancels its request when no byte arrives for timeout.
type stallReader struct {
	rc      io.ReadCloser
	cancel  context.CancelFunc
	timer   *time.Timer
	timeout time.Duration
	stalled chan struct{}
	once    sync.Once
}

func newStallReader(rc io.ReadCloser, cancel context.CancelFunc, timeout time.Duration) *stallReader {
	s := &stallReader{rc: rc, cancel: cancel, timeout: timeout, stalled: make(chan struct{})}
	s.timer = time.AfterFunc(timeout, func() {
		s.once.Do(func() { close(s.stalled) })
		cancel()
	})
	return s
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if err != nil {
		select {
		case <-s.stalled:
			return n, fmt.Errorf("%w for %s", errStalled, s.timeout)
		default:
		}
		return n, err
	}
	s.timer.Reset(s.timeout)
	return n, nil
}

func (s *stallReader) Close() error {
	s.timer.Stop()
	err := s.rc.Close()
	s.cancel()
	return err
}
