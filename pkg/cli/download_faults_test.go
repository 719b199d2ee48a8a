package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// Network settings for the fault tests, through the environment as a CI job would set them (an
// old binary without these flags ignores them, and then hangs: the test kills it and fails).
// Two retries ride out the two 503s; a stall gives up after its third attempt.
var faultEnv = []string{"FLATCAR_CAPO_STALL_TIMEOUT=1s", "FLATCAR_CAPO_RETRIES=2"}

// faultBound is how long a failing download may take with faultEnv: three attempts of a 1 s
// stall plus backoff is about 5 s; the rest is slack for a loaded machine.
const faultBound = 45 * time.Second

// faultWorld is a Kubernetes mirror and a release server (version.txt only, what a dry run
// reads) behind one fault-injecting server on 127.0.0.1, with a private cache and TMPDIR, so the
// subtests run in parallel (they mostly wait for timeouts).
type faultWorld struct {
	srv                   *faultServer
	k8s                   kubernetes.Options
	dir, cache, tmp, base string
}

func newFaultWorld(t *testing.T) *faultWorld {
	t.Helper()
	mirror := kubetest.New(t, kubernetes.Options{})
	mux := http.NewServeMux()
	mux.HandleFunc("/stable/amd64-usr/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/version.txt") {
			w.Write([]byte("FLATCAR_VERSION=4459.2.0\nFLATCAR_VERSION_ID=4459.2.0\nFLATCAR_BUILD=4459\n" + strings.Repeat("# padding\n", 100)))
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc("/sysexts/", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("not really a sysext\n", 1000)))
	})
	mux.Handle("/", mirror.Config.Handler)
	w := &faultWorld{srv: newFaultServer(t, mux), k8s: mirror.Options, dir: t.TempDir()}
	w.cache, w.tmp, w.base = filepath.Join(w.dir, "cache"), filepath.Join(w.dir, "tmp"), filepath.Join(w.dir, "base.img")
	os.Mkdir(w.tmp, 0o700)
	os.WriteFile(w.base, make([]byte, 1<<20), 0o644)
	return w
}

func (w *faultWorld) mirrorArgs() []string {
	return []string{"--kubernetes-mirror", w.srv.URL + "/release", "--github-mirror", w.srv.URL,
		"--kubernetes-version", w.k8s.Kubernetes, "--crictl-version", w.k8s.Crictl, "--cni-version", w.k8s.CNI, "--cache-dir", w.cache}
}

func (w *faultWorld) kubeletURL() string {
	return w.srv.URL + "/release/" + w.k8s.Kubernetes + "/bin/linux/amd64/kubelet"
}

func (w *faultWorld) run(t *testing.T, args ...string) (testutil.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	r := testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: w.dir, Env: append([]string{"TMPDIR=" + w.tmp}, faultEnv...), Timeout: 2 * faultBound})
	return r, time.Since(start)
}

func (w *faultWorld) sysextCreate(t *testing.T) (testutil.Result, time.Duration) {
	return w.run(t, append([]string{"sysext", "create", "--output-file", filepath.Join(w.dir, "k8s.raw")}, w.mirrorArgs()...)...)
}

func (w *faultWorld) buildSysext(t *testing.T, extra ...string) (testutil.Result, time.Duration) {
	args := append([]string{"build", "--method", "sysext", "--base-image", w.base, "--version", "4459.2.0",
		"--output-dir", filepath.Join(w.dir, "out")}, w.mirrorArgs()...)
	return w.run(t, append(args, extra...)...)
}

// mustBeClean fails when a download left a partial or temporary file: in the cache only
// verified files may exist, the output directory and TMPDIR hold nothing.
func (w *faultWorld) mustBeClean(t *testing.T, unverified ...string) {
	t.Helper()
	filepath.WalkDir(w.cache, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		for _, u := range unverified {
			if strings.Contains(filepath.Base(p), u) {
				t.Errorf("left in the cache: %s", p)
			}
		}
		return nil
	})
	for _, d := range []string{w.tmp, filepath.Join(w.dir, "out")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			t.Errorf("left behind: %s", filepath.Join(d, e.Name()))
		}
	}
	if _, err := os.Stat(filepath.Join(w.dir, "k8s.raw")); err == nil {
		t.Error("sysext create wrote its output after a failed download")
	}
}

func mustFailFast(t *testing.T, r testutil.Result, took time.Duration, url string) {
	t.Helper()
	r.MustFail(t, 1, url, "no data received for 1s")
	t.Logf("failed after %s", took.Round(10*time.Millisecond))
	if took > faultBound {
		t.Fatalf("the stalled download failed only after %s", took)
	}
}

// A mirror that accepts and then stalls mid-body fails every downloading command within the
// stall timeout, naming the URL, and leaves no partial file (before httpx: sysext create and
// build hung forever on the Kubernetes binaries, --sysext URL and a dry run's version.txt).
func TestStalledDownloadsFailWithinStallTimeout(t *testing.T) {
	t.Parallel() // with the other fault tests: all wait on timeouts
	sysextURL := "/sysexts/kubernetes.raw"
	for _, c := range []struct {
		name, stall string
		after       int64 // bytes sent before the stall
		run         func(w *faultWorld, t *testing.T) (testutil.Result, time.Duration)
		url         func(w *faultWorld) string
		unverified  []string // nil: nothing to check in the cache (a dry run writes none)
	}{
		{"sysext create", "/kubelet", 100, (*faultWorld).sysextCreate, (*faultWorld).kubeletURL, []string{"kubelet"}},
		{"build --method sysext, Kubernetes binaries", "/kubelet", 100, func(w *faultWorld, t *testing.T) (testutil.Result, time.Duration) {
			return w.buildSysext(t)
		}, (*faultWorld).kubeletURL, []string{"kubelet"}},
		{"build --method sysext --sysext URL", sysextURL, 100, func(w *faultWorld, t *testing.T) (testutil.Result, time.Duration) {
			return w.buildSysext(t, "--sysext", w.srv.URL+sysextURL)
		}, func(w *faultWorld) string { return w.srv.URL + sysextURL }, []string{}},
		{"build --dry-run", "/version.txt", 20, func(w *faultWorld, t *testing.T) (testutil.Result, time.Duration) {
			return w.run(t, append([]string{"build", "--dry-run", "--release-server", w.srv.URL + "/{channel}"}, w.mirrorArgs()...)...)
		}, func(w *faultWorld) string { return w.srv.URL + "/stable/amd64-usr/current/version.txt" }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newFaultWorld(t)
			w.srv.Stall(c.stall, c.after)
			r, took := c.run(w, t)
			mustFailFast(t, r, took, c.url(w))
			if c.unverified != nil {
				w.mustBeClean(t, c.unverified...)
			}
		})
	}
}

// A mirror that answers 503 twice and then serves: every download retries and succeeds (before
// httpx the Kubernetes binaries and --sysext URL failed at the first 503).
func TestDownloadsRetry503(t *testing.T) {
	t.Parallel() // with the other fault tests: all wait on timeouts
	t.Run("sysext create", func(t *testing.T) {
		t.Parallel()
		w := newFaultWorld(t)
		w.srv.Fail("/kubelet", http.StatusServiceUnavailable, 2)
		r, _ := w.sysextCreate(t)
		r.MustSucceed(t)
		if n := w.srv.Hits("/release/" + w.k8s.Kubernetes + "/bin/linux/amd64/kubelet"); n != 3 {
			t.Errorf("%d requests for kubelet, want 3 (two 503, then the file)", n)
		}
	})
	// The build stops later (the base image here is no Flatcar image); the download steps pass.
	t.Run("build --method sysext, Kubernetes binaries", func(t *testing.T) {
		t.Parallel()
		w := newFaultWorld(t)
		w.srv.Fail("/kubelet", http.StatusServiceUnavailable, 2)
		r, _ := w.buildSysext(t)
		if !strings.Contains(r.Stderr, "kubernetes   done") || !strings.Contains(r.Stderr, "503 Service Unavailable (at byte 0); retrying") {
			t.Fatalf("the kubernetes step did not pass after two 503s:\n%s", r.Stderr)
		}
	})
	t.Run("build --method sysext --sysext URL", func(t *testing.T) {
		t.Parallel()
		w := newFaultWorld(t)
		w.srv.Fail("/sysexts/kubernetes.raw", http.StatusServiceUnavailable, 2)
		r, _ := w.buildSysext(t, "--sysext", w.srv.URL+"/sysexts/kubernetes.raw")
		if !strings.Contains(r.Stderr, "resolve      done") {
			t.Fatalf("the --sysext download did not pass after two 503s:\n%s", r.Stderr)
		}
		if n := w.srv.Hits("/sysexts/kubernetes.raw"); n != 3 {
			t.Errorf("%d requests for the sysext, want 3", n)
		}
	})
	t.Run("build --dry-run", func(t *testing.T) {
		t.Parallel()
		w := newFaultWorld(t)
		w.srv.Fail("/version.txt", http.StatusServiceUnavailable, 2)
		r, _ := w.run(t, append([]string{"build", "--method", "sysext", "--dry-run", "--release-server", w.srv.URL + "/{channel}"}, w.mirrorArgs()...)...)
		r.MustSucceed(t)
	})
}

// A server that trickles (a byte every 50 ms: never a stall) fails every downloading command at
// --download-timeout (here FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s), naming the URL; before, any
// progress reset the retry budget and the command ran for hours.
func TestTrickleHitsDownloadTimeout(t *testing.T) {
	t.Parallel() // with the other fault tests: all wait on timeouts
	env := []string{"FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s"}
	for _, tc := range []struct {
		name, suffix string
		args         func(w *faultWorld) []string
		url          func(w *faultWorld) string
	}{
		{"release", "/version.txt", func(w *faultWorld) []string {
			return []string{"release", "--release-server", w.srv.URL + "/{channel}"}
		}, func(w *faultWorld) string { return w.srv.URL + "/stable/amd64-usr/current/version.txt" }},
		{"build --dry-run", "/version.txt", func(w *faultWorld) []string {
			return append([]string{"build", "--dry-run", "--release-server", w.srv.URL + "/{channel}"}, w.mirrorArgs()...)
		}, func(w *faultWorld) string { return w.srv.URL + "/stable/amd64-usr/current/version.txt" }},
		{"sysext create", "/kubelet", func(w *faultWorld) []string {
			return append([]string{"sysext", "create", "--output-file", filepath.Join(w.dir, "k8s.raw")}, w.mirrorArgs()...)
		}, (*faultWorld).kubeletURL},
		{"build --method sysext", "/kubelet", func(w *faultWorld) []string {
			return append([]string{"build", "--method", "sysext", "--base-image", w.base, "--version", "4459.2.0",
				"--output-dir", filepath.Join(w.dir, "out")}, w.mirrorArgs()...)
		}, (*faultWorld).kubeletURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newFaultWorld(t)
			w.srv.Trickle(tc.suffix, 50*time.Millisecond)
			start := time.Now()
			r := testutil.RunCmd(t, testutil.Cmd{Args: tc.args(w), Dir: w.dir, Env: append([]string{"TMPDIR=" + w.tmp}, env...), Timeout: 2 * faultBound})
			r.MustFail(t, 1, tc.url(w), "not finished after 2s", "--download-timeout")
			t.Logf("failed after %s", time.Since(start).Round(10*time.Millisecond))
			if took := time.Since(start); took > faultBound {
				t.Errorf("the trickle was stopped only after %s", took)
			}
			w.mustBeClean(t, "kubelet")
		})
	}
}

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
