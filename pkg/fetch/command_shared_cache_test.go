package fetch_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx/httpxtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// through serves the world's release server behind a fault-injecting one.
func (w *world) through(t *testing.T) *httpxtest.Server {
	return httpxtest.New(t, w.srv.Config.Handler)
}

func (w *world) cmd(srv *httpxtest.Server, out string, env ...string) testutil.Cmd {
	return testutil.Cmd{Args: w.args("fetch", "--release-server", srv.URL+"/{channel}", "--output-file", out),
		Dir: w.dir, Env: env, Timeout: 3 * time.Minute}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A second fetch of a release another process is downloading into the same cache waits for it
// (one line says so), then serves the verified file from the cache: one image download in all.
// Before, it failed at once with "another flatcar-capo is downloading".
func TestFetchSharedCacheWaitsForDownload(t *testing.T) {
	t.Parallel() // its own world; it waits on locks and timeouts
	w := newWorld(t)
	srv := w.through(t)
	release := srv.Hold(imgName, 1<<20)
	defer release()
	first, second := make(chan testutil.Result, 1), make(chan testutil.Result, 1)
	go func() { first <- testutil.RunCmd(t, w.cmd(srv, "a.img")) }()
	waitFor(t, "the first download", func() bool { return srv.Hits(w.cur.ImgPath()) == 1 })
	go func() { second <- testutil.RunCmd(t, w.cmd(srv, "b.img")) }()
	waitFor(t, "the second fetch to resolve", func() bool { return srv.Hits("/stable/amd64-usr/current/version.txt") == 2 })
	time.Sleep(2 * time.Second) // the second run is at the cache lock now
	release()
	(<-first).MustSucceed(t)
	r := (<-second).MustSucceed(t)
	if !strings.Contains(r.Stderr, "another flatcar-capo is downloading or reading "+imgName) || !strings.Contains(r.Stderr, "waiting for it (at most 30m0s)") {
		t.Errorf("the second fetch did not say it waits:\n%s", r.Stderr)
	}
	mustHave(t, filepath.Join(w.dir, "a.img"), w.cur.Content)
	mustHave(t, filepath.Join(w.dir, "b.img"), w.cur.Content)
	if n := srv.Hits(w.cur.ImgPath()); n != 1 {
		t.Errorf("%d image downloads, want 1 (the second run reads the cache)", n)
	}
}

// Reading a verified cache entry takes a shared lock: it runs beside another reader. A writer
// holding the lock longer than --download-timeout ends the wait with a clear error.
func TestFetchCacheLockSharedAndBounded(t *testing.T) {
	t.Parallel() // its own world; it waits on locks and timeouts
	w := newWorld(t)
	w.run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	lock, err := os.Open(filepath.Join(w.cache, "amd64-usr", currentVersion, imgName+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil { // another reader
		t.Fatal(err)
	}
	r := w.run(t, "fetch", "--output-file", "b.img", "-o", "json").MustSucceed(t)
	if !strings.Contains(r.Stdout, `"cached": true`) || strings.Contains(r.Stderr, "waiting") {
		t.Fatalf("a cache hit beside another reader:\n%s%s", r.Stdout, r.Stderr)
	}
	mustHave(t, filepath.Join(w.dir, "b.img"), w.cur.Content)

	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil { // a stuck writer
		t.Fatal(err)
	}
	start := time.Now()
	c := testutil.Cmd{Args: w.args("fetch", "--output-file", "c.img"), Dir: w.dir, Env: []string{"FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s"}, Timeout: time.Minute}
	testutil.RunCmd(t, c).MustFail(t, 1, "waiting for it (at most 2s)", "has held", imgName+".lock", "--download-timeout", "--cache-dir")
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s, before the 2s bound", took)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "c.img")); err == nil {
		t.Error("output written after the failed wait")
	}
}

// A server that trickles (a byte every 20 ms: never a stall, never done) fails the fetch at
// --download-timeout, naming the URL, with the bytes kept for a resume; no output. Before, the
// retry budget reset on every byte and the fetch ran for hours.
func TestFetchTrickleHitsDownloadTimeout(t *testing.T) {
	t.Parallel() // its own world; it waits on locks and timeouts
	w := newWorld(t)
	srv := w.through(t)
	srv.Trickle(imgName, 20*time.Millisecond)
	start := time.Now()
	r := testutil.RunCmd(t, w.cmd(srv, "out.img", "FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s", "FLATCAR_CAPO_STALL_TIMEOUT=1s"))
	r.MustFail(t, 1, srv.URL+w.cur.ImgPath(), "not finished after 2s", "--download-timeout", ".partial", "run the same command again to resume")
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("the trickle was stopped only after %s", took)
	}
	mustBeEmpty(t, w.dir)
}
