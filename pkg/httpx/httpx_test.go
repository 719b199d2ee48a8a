package httpx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func serve(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Download keeps the file only when its digest matches; a mismatch or a cut leaves nothing.
func TestDownloadVerifies(t *testing.T) {
	body := strings.Repeat("flatcar", 1000)
	sum := sha256.Sum256([]byte(body))
	url := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	dir := t.TempDir()
	c := New(Options{})
	d, err := c.Download(context.Background(), url, filepath.Join(dir, "ok"), Digest{"sha256", hex.EncodeToString(sum[:])}, 0o644)
	if err != nil || d.Bytes != int64(len(body)) {
		t.Fatalf("%+v, %v", d, err)
	}
	_, err = c.Download(context.Background(), url, filepath.Join(dir, "bad"), Digest{"sha256", strings.Repeat("0", 64)}, 0o644)
	var de *DigestError
	if !errors.As(err, &de) || de.Got != hex.EncodeToString(sum[:]) {
		t.Fatalf("want a digest error, got %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "ok" {
		t.Fatalf("left in the directory: %v", ents)
	}
}

// The deadline bounds a download however it progresses, and is not a cancellation.
func TestDeadlineEndsATrickle(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		for range 1000 {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	c := New(Options{Retries: 5, StallTimeout: time.Second, DownloadTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.Download(context.Background(), url, filepath.Join(t.TempDir(), "f"), Digest{Algo: "sha512"}, 0o644)
	var de *DeadlineError
	if !errors.As(err, &de) || de.Got == 0 || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error after some bytes, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("stopped after %s", time.Since(start))
	}
	if _, err := c.GetSmall(context.Background(), url, 1<<20); !errors.As(err, &de) {
		t.Fatalf("GetSmall: want a deadline error, got %v", err)
	}
}

// Transport() gives another HTTP client (a registry client) the header and body stall timeouts.
func TestTransportStallsForOtherClients(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/headers" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	other := &http.Client{Transport: New(Options{StallTimeout: 200 * time.Millisecond}).Transport()}
	if _, err := other.Get(url + "/headers"); !IsStalled(err) {
		t.Fatalf("no headers: want a stall, got %v", err)
	}
	resp, err := other.Get(url + "/body")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !IsStalled(err) {
		t.Fatalf("stalled body: want a stall, got %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Retries: -1}, {StallTimeout: -time.Second}, {DownloadTimeout: -time.Second}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	o := Options{}
	if err := o.Validate(); err != nil || o.StallTimeout != DefaultStallTimeout || o.DownloadTimeout != DefaultDownloadTimeout {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// Every client on the project's transport stops a redirect chain: a loop at the first repeat,
// a chain without repeats after MaxRedirects, whatever the client's CheckRedirect allows
// (go-containerregistry's allows any number).
func TestTransportStopsRedirectLoops(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		switch {
		case r.URL.Path == "/self":
			http.Redirect(w, r, "/self", http.StatusFound)
		case r.URL.Path == "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case r.URL.Path == "/b":
			http.Redirect(w, r, "/a", http.StatusFound)
		default: // /chain/N -> /chain/N+1, never the same
			var i int
			fmt.Sscanf(r.URL.Path, "/chain/%d", &i)
			http.Redirect(w, r, fmt.Sprintf("/chain/%d", i+1), http.StatusFound)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: NewTransportTLS(Options{}, nil),
		CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	for path, want := range map[string]struct {
		msg  string
		reqs int64
	}{
		"/self":    {"a redirect loop (it redirects to itself)", 1},
		"/a":       {"a redirect loop (2 redirects from " + srv.URL + "/a lead back to " + srv.URL + "/a)", 2},
		"/chain/0": {"stopped after 10 redirects from " + srv.URL + "/chain/0", 11},
	} {
		n.Store(0)
		_, err := c.Get(srv.URL + path)
		var re *redirectError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want.msg) || !strings.Contains(err.Error(), srv.URL+path) {
			t.Errorf("%s: %v, want %q", path, err, want.msg)
		}
		if n.Load() != want.reqs {
			t.Errorf("%s: %d requests, want %d", path, n.Load(), want.reqs)
		}
	}
}

// An error response's body is read at most MaxErrorBody bytes by any client on the transport
// (gophercloud and go-containerregistry read it whole): a server answering 500 with an endless
// body does not fill the memory.
func TestTransportBoundsErrorBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: NewTransportTLS(Options{}, nil)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != maxErrorBody {
		t.Fatalf("read %d bytes (%v), want %d", len(b), err, maxErrorBody)
	}
}
