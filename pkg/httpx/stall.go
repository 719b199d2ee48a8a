package httpx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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
	s := &stallReader{rc: resp.Body, cancel: cancel, timeout: t.timeout}
	s.timer = time.AfterFunc(t.timeout, func() {
		s.stalled.Store(true)
		cancel()
	})
	resp.Body = s
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
	stalled atomic.Bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if err != nil {
		if s.stalled.Load() {
			return n, fmt.Errorf("%w for %s (--stall-timeout)", errStalled, s.timeout)
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
