package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultServer puts network faults in front of a test server on 127.0.0.1: a response that
// stalls mid-body, one that trickles, and error answers a given number of times, so the
// command tests see what a bad mirror does to every download.
type faultServer struct {
	*httptest.Server
	inner http.Handler

	mu     sync.Mutex
	faults map[string]*fault // by URL path suffix
	hits   map[string]int    // requests per URL path
	done   chan struct{}
}

type fault struct {
	failCode, failTimes int           // answer failCode this many more times
	stallAfter          int64         // send this many bytes, then nothing (-1: no stall)
	trickle             time.Duration // one byte every trickle (0: no trickle)
	hold                chan struct{} // with stallAfter: send the rest once closed
}

// newFaultServer starts it in front of inner, closed when the test ends (stalled responses
// are released first).
func newFaultServer(t testing.TB, inner http.Handler) *faultServer {
	s := &faultServer{inner: inner, faults: map[string]*fault{}, hits: map[string]int{}, done: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.Server.CloseClientConnections()
		s.Server.Close()
	})
	return s
}

func (s *faultServer) fault(suffix string) *fault {
	f, ok := s.faults[suffix]
	if !ok {
		f = &fault{stallAfter: -1}
		s.faults[suffix] = f
	}
	return f
}

// Fail makes requests for paths ending in suffix get code for the next times requests.
func (s *faultServer) Fail(suffix string, code, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault(suffix)
	f.failCode, f.failTimes = code, times
}

// Stall makes responses for paths ending in suffix send their headers and the first after
// bytes of the body, then nothing until the test ends.
func (s *faultServer) Stall(suffix string, after int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault(suffix).stallAfter = after
}

// Hold makes responses for paths ending in suffix send their first after bytes, then wait
// until release is called, then send the rest: a download that is slow for as long as the
// test wants.
func (s *faultServer) Hold(suffix string, after int64) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault(suffix)
	f.stallAfter, f.hold = after, make(chan struct{})
	var once sync.Once
	ch := f.hold
	return func() { once.Do(func() { close(ch) }) }
}

// Trickle makes responses for paths ending in suffix send one byte every interval: progress
// that never stalls and never ends in useful time.
func (s *faultServer) Trickle(suffix string, every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault(suffix).trickle = every
}

// Hits is the number of requests for a URL path so far.
func (s *faultServer) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	var f fault
	found := false
	for suffix, ff := range s.faults {
		if strings.HasSuffix(r.URL.Path, suffix) {
			if ff.failTimes > 0 {
				ff.failTimes--
				s.mu.Unlock()
				http.Error(w, http.StatusText(ff.failCode), ff.failCode)
				return
			}
			f, found = *ff, true
			break
		}
	}
	s.mu.Unlock()
	if !found || (f.stallAfter < 0 && f.trickle == 0) {
		s.inner.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.inner.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(rec.Code)
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	if f.trickle > 0 {
		for _, b := range body {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			flush()
			select {
			case <-time.After(f.trickle):
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			}
		}
		return
	}
	n := min(f.stallAfter, int64(len(body)))
	w.Write(body[:n])
	flush()
	select {
	case <-r.Context().Done():
		return
	case <-s.done:
		return
	case <-f.hold: // nil without Hold: never
	}
	w.Write(body[n:])
}
