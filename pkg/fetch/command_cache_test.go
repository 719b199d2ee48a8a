package fetch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cached file is re-hashed on use: a damaged one is noticed and downloaded again.
func TestFetchCacheDamageIsRedownloaded(t *testing.T) {
	w := newWorld(t)
	w.run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	cached := filepath.Join(w.cache, "amd64-usr", currentVersion, imgName)
	b, err := os.ReadFile(cached)
	if err != nil {
		t.Fatalf("verified download not cached: %v", err)
	}
	b[100] ^= 1
	os.WriteFile(cached, b, 0o600)
	w.srv.ResetRequests()
	r := w.testRun(t, "fetch", "--output-file", "b.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "b.img"), w.cur.Content)
	if !strings.Contains(r.Stderr, "is no longer valid") || len(w.srv.Requests(imgName)) != 1 {
		t.Fatalf("damaged cache not re-downloaded once:\n%s", r.Stderr)
	}
	mustHave(t, cached, w.cur.Content)
}

// The cache is no way around verification: with another keyring the cached DIGESTS no longer
// verify, the fresh download is checked too, and the fetch fails.
func TestFetchCacheHonoursKeyring(t *testing.T) {
	w := newWorld(t)
	w.run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	other := filepath.Join(w.base, "other.asc")
	os.WriteFile(other, newKeyArmored(t), 0o644)
	w.run(t, "fetch", "--output-file", "b.img", "--keyring", other).MustFail(t, 1, "which is not in the keyring "+other)
	if _, err := os.Stat(filepath.Join(w.dir, "b.img")); err == nil {
		t.Fatal("output written despite the failed verification")
	}
}

// Kept bytes that are wrong (not just short) fail the digest; the download restarts from byte 0.
func TestFetchBadPartialRestartsFromZero(t *testing.T) {
	w := newWorld(t)
	dir := filepath.Join(w.cache, "amd64-usr", currentVersion)
	os.MkdirAll(dir, 0o700)
	junk := make([]byte, len(w.cur.Content)/2)
	os.WriteFile(filepath.Join(dir, imgName+".partial"), junk, 0o600)
	r := w.testRun(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "out.img"), w.cur.Content)
	reqs := w.srv.Requests(imgName)
	if len(reqs) != 2 || reqs[0].Range == "" || reqs[1].Range != "" {
		t.Fatalf("requests %+v, want a resume then a full download", reqs)
	}
	if !strings.Contains(r.Stderr, "downloading it again from the start") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
}

// Without a terminal, progress is plain lines (no carriage returns) on stderr.
func TestFetchProgressInPipe(t *testing.T) {
	w := newWorld(t)
	r := w.testRun(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	if strings.Contains(r.Stderr, "\r") || !strings.Contains(r.Stderr, "Downloading ") {
		t.Fatalf("stderr in a pipe: %q", r.Stderr)
	}
	r = w.run(t, "fetch", "--output-file", "out2.img").MustSucceed(t) // --quiet
	if r.Stderr != "" {
		t.Fatalf("--quiet printed: %q", r.Stderr)
	}
}
