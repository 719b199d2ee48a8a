package httpx

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A server that sends headers and then nothing must not hang the download.
func TestStalledBodyFails(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c := New(Options{StallTimeout: 200 * time.Millisecond})
	body, err := c.Open(context.Background(), srv.URL+"/img", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, body)
	if err == nil || !strings.Contains(err.Error(), "no data received") || n != 10 {
		t.Fatalf("copied %d bytes, error %v; want 10 bytes then a stall error", n, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("stall noticed only after %s", time.Since(start))
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tc := range tests {
		s, tot, ok := parseContentRange(tc.in)
		if ok != tc.ok || ok && (s != tc.start || tot != tc.total) {
			t.Errorf("%q: %d %d %v", tc.in, s, tot, ok)
		}
	}
}
