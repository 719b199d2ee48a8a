package httpx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

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
	if IsUntrusted(err) {
		return false // the same certificate again
	}
	return true // connection refused/reset, timeouts, unexpected EOF, stalls
}
