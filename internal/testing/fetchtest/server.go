package fetchtest

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Request is one request the server saw.
type Request struct {
	Path  string
	Range string
}

// Server serves a release tree from memory on 127.0.0.1.
type Server struct {
	*httptest.Server
	NoRange  bool // answer every request in full, as a server without Range support
	mu       sync.Mutex
	files    map[string][]byte
	requests []Request
	status   map[string]int
	drops    map[string]drop
}

type drop struct {
	at    int64 // absolute offset at which the connection is cut
	times int   // requests left to cut; < 0 means every one
}

// NewServer starts a server that is closed when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{files: map[string][]byte{}, status: map[string]int{}, drops: map[string]drop{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// NewTLSServer is NewServer over HTTPS (httptest's certificate for 127.0.0.1); CAFile is that
// certificate as PEM, the --ca-file that trusts it.
func NewTLSServer(t testing.TB) (s *Server, caFile string) {
	s = &Server{files: map[string][]byte{}, status: map[string]int{}, drops: map[string]drop{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return s, caFile
}

// ReleaseServer is the --release-server value: every channel under /<channel>.
func (s *Server) ReleaseServer() string { return s.URL + "/{channel}" }

// Put stores a file at a URL path.
func (s *Server) Put(path string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = b
}

// Get returns the file stored at path.
func (s *Server) Get(path string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[path]
}

// Remove deletes a file, so the server answers 404 for it.
func (s *Server) Remove(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
}

// SetStatus makes every request for path answer code (0 restores normal service).
func (s *Server) SetStatus(path string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status[path] = code
}

// DropAt cuts the connection once byte offset at of path has been sent, for the next times
// requests (times < 0: all of them). A request starting at or after at is cut before any byte.
func (s *Server) DropAt(path string, at int64, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops[path] = drop{at: at, times: times}
}

// Requests returns the requests whose path ends with suffix.
func (s *Server) Requests(suffix string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// ResetRequests forgets the requests seen so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Range: r.Header.Get("Range")})
	body, ok := s.files[r.URL.Path]
	code := s.status[r.URL.Path]
	d, dropping := s.drops[r.URL.Path]
	if dropping && d.times != 0 {
		d.times--
		s.drops[r.URL.Path] = d
	} else {
		dropping = false
	}
	s.mu.Unlock()
	switch {
	case code != 0:
		http.Error(w, http.StatusText(code), code)
		return
	case !ok:
		http.NotFound(w, r)
		return
	}
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" && !s.NoRange {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "only bytes=N- ranges", http.StatusBadRequest)
			return
		}
		if n >= int64(len(body)) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(body)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(body)-1, len(body)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)-int(start)))
	w.Header().Set("Content-Type", "application/octet-stream")
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	if !dropping {
		w.Write(body[start:])
		return
	}
	if d.at > start {
		w.Write(body[start:d.at])
	}
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}
