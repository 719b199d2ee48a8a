package httpx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// stallTransport gives every response body a stall timer: a body that delivers nothing for
// timeout has its request cancelled, and its Read says it stalled. It lives in the transport
// so that every user of NewTransportTLS gets it, not only this package's downloads.
type stallTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if req.Context().Err() == nil && isTimeout(err) { // not the caller's own cancellation
			err = fmt.Errorf("%w for %s (--stall-timeout) waiting for the answer: %v", errStalled, t.timeout, err)
		}
		return nil, err
	}
	resp.Body = newStallReader(resp.Body, cancel, t.timeout)
	return resp, nil
}

func isTimeout(err error) bool {
	te, ok := err.(interface{ Timeout() bool })
	return ok && te.Timeout()
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
			return n, fmt.Errorf("%w for %s (--stall-timeout)", errStalled, s.timeout)
		default:
		}
		return n, err
	}
	if n > 0 {
		s.timer.Reset(s.timeout)
	}
	return n, nil
}

func (s *stallReader) Close() error {
	s.timer.Stop()
	err := s.rc.Close()
	s.cancel()
	return err
}
