package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

func newKeyArmored(t *testing.T) []byte {
	return fetchtest.NewKey(t, "Another Buildbot", time.Now()).PublicArmored(t)
}

// mustBeEmpty fails when the output directory holds anything (an output or a temp file).
func mustBeEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind in the output directory: %s", e.Name())
	}
}

// cachedFiles lists the verified files in the cache (not .partial, .lock or DIGESTS).
func cachedFiles(t *testing.T, cache string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".img") || strings.HasSuffix(p, ".bz2")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestFetchImgThenCache(t *testing.T) {
	w := fetchtest.NewWorld(t)
	r := w.Run(t, "fetch", "-o", "json").MustSucceed(t)
	out := filepath.Join(w.Dir, "flatcar-stable-"+fetchtest.CurrentVersion+"-qemu.img")
	fetchtest.MustHave(t, out, w.Cur.Content)
	var res struct {
		File, Version, Compression string
		Cached, Verified           bool
	}
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Version != fetchtest.CurrentVersion || res.Compression != "none" || res.Cached || !res.Verified {
		t.Fatalf("first fetch: %+v", res)
	}
	if n := len(w.Srv.Requests(fetchtest.ImgName + ".bz2")); n != 0 {
		t.Fatalf("the .img exists, yet the .bz2 was requested %d times", n)
	}

	// Second fetch of the same version: no image request, same bytes, reported as cached.
	w.Srv.ResetRequests()
	os.Remove(out)
	r = w.Run(t, "fetch", "--output-file", "again.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "again.img"), w.Cur.Content)
	if reqs := w.Srv.Requests(".img"); len(reqs) != 0 {
		t.Fatalf("second fetch requested the image: %+v", reqs)
	}
	if reqs := w.Srv.Requests(".asc"); len(reqs) != 0 {
		t.Fatalf("second fetch requested the signed digests: %+v", reqs)
	}
	if !strings.Contains(r.Stdout, "from cache") || !strings.Contains(r.Stdout, fetchtest.CurrentVersion) {
		t.Fatalf("cached fetch report: %s", r.Stdout)
	}
}

func TestFetchBz2FallbackAndForced(t *testing.T) {
	w := fetchtest.NewWorld(t)
	// An old release has no .img: the server answers 404 and the .bz2 is used.
	w.Run(t, "fetch", "--version", fetchtest.OldVersion, "--output-file", "old.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "old.img"), w.Old.Content)
	if len(w.Srv.Requests(fetchtest.OldVersion+"/"+fetchtest.ImgName+".bz2")) != 1 {
		t.Fatal("the .bz2 was not downloaded exactly once")
	}
	// --compression bz2 picks the .bz2 even when the .img exists.
	r := w.Run(t, "fetch", "--compression", "bz2", "--output-file", "cur.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "cur.img"), w.Cur.Content)
	if !strings.Contains(r.Stdout, "decompressed from .bz2") {
		t.Fatalf("report: %s", r.Stdout)
	}
	if len(w.Srv.Requests(fetchtest.CurrentVersion+"/"+fetchtest.ImgName)) != 0 {
		t.Fatal("--compression bz2 still requested the .img")
	}
	// The cached .bz2 is decoded again without a download.
	w.Srv.ResetRequests()
	w.Run(t, "fetch", "--version", fetchtest.OldVersion, "--output-file", "old2.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "old2.img"), w.Old.Content)
	if reqs := w.Srv.Requests(".bz2"); len(reqs) != 0 {
		t.Fatalf("cached .bz2 downloaded again: %+v", reqs)
	}
}

// Ctrl-C during a .bz2 decode (8 GiB of zeros from a few hundred KiB) stops it promptly: exit
// 130, no output. (pkg/fetch's TestStreamStopsWhenCancelled covers a decoder that goes long
// without reading its source.)
func TestFetchBz2DecodeStopsOnInterrupt(t *testing.T) {
	w := fetchtest.NewWorld(t)
	w.Srv.PublishFile(t, w.Cur, w.Cur.BZ2Path(), bytes.Repeat(fetchtest.Bzip2(t, make([]byte, 8<<20)), 1024))
	cmd := exec.Command(testutil.Binary(t), w.Args("fetch", "--compression", "bz2", "--output-file", "out.img")...)
	cmd.Dir, cmd.Env = w.Dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.Base}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	decoding := func() bool { // the output's temporary file holds 64 MiB
		ents, _ := os.ReadDir(w.Dir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Size() >= 64<<20 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(2 * time.Minute); !decoding(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no decoded output within 2 minutes:\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "Interrupted") {
			t.Fatalf("exit %v, want 130 and the interruption said; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still decoding 15 s after Ctrl-C:\n%s", stderr.String())
	}
	mustBeEmpty(t, w.Dir)
}

func TestFetchResumesAfterDrop(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		args       []string
		content    func(w *fetchtest.World) []byte
	}{
		{"img", fetchtest.CurrentVersion + "/" + fetchtest.ImgName, nil, func(w *fetchtest.World) []byte { return w.Cur.Content }},
		{"bz2", fetchtest.CurrentVersion + "/" + fetchtest.ImgName + ".bz2", []string{"--compression", "bz2"}, func(w *fetchtest.World) []byte { return w.Cur.Content }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fetchtest.NewWorld(t)
			path := "/stable/amd64-usr/" + tc.path
			half := int64(len(w.Srv.Get(path)) / 2)
			w.Srv.DropAt(path, half, -1)
			w.Run(t, "fetch", append(tc.args, "--retries", "0")...).
				MustFail(t, 1, "failed at byte", "run the same command again to resume")
			mustBeEmpty(t, w.Dir)
			if len(cachedFiles(t, w.Cache)) != 0 {
				t.Fatal("an unverified download entered the cache")
			}
			w.Srv.DropAt(path, 0, 0)
			w.Srv.ResetRequests()
			w.Run(t, "fetch", append(tc.args, "--output-file", "out.img")...).MustSucceed(t)
			fetchtest.MustHave(t, filepath.Join(w.Dir, "out.img"), tc.content(w))
			reqs := w.Srv.Requests(tc.path)
			if len(reqs) != 1 || reqs[0].Range != "bytes="+itoa(half)+"-" {
				t.Fatalf("resume requests %+v, want one with Range bytes=%d-", reqs, half)
			}
		})
	}
}

// A connection cut once mid-body is resumed within the same run.
func TestFetchReconnectsWithinOneRun(t *testing.T) {
	w := fetchtest.NewWorld(t)
	path := "/stable/amd64-usr/" + fetchtest.CurrentVersion + "/" + fetchtest.ImgName
	w.Srv.DropAt(path, int64(len(w.Cur.Content)/3), 1)
	w.Run(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "out.img"), w.Cur.Content)
	reqs := w.Srv.Requests(fetchtest.ImgName)
	if len(reqs) != 2 || reqs[1].Range != "bytes="+itoa(int64(len(w.Cur.Content)/3))+"-" {
		t.Fatalf("requests %+v, want a full one then a Range from the cut", reqs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A cached file is re-hashed on use: a damaged one is noticed and downloaded again.
func TestFetchCacheDamageIsRedownloaded(t *testing.T) {
	w := fetchtest.NewWorld(t)
	w.Run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	cached := filepath.Join(w.Cache, "amd64-usr", fetchtest.CurrentVersion, fetchtest.ImgName)
	b, err := os.ReadFile(cached)
	if err != nil {
		t.Fatalf("verified download not cached: %v", err)
	}
	b[100] ^= 1
	os.WriteFile(cached, b, 0o600)
	w.Srv.ResetRequests()
	r := w.RunWithNotes(t, "fetch", "--output-file", "b.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "b.img"), w.Cur.Content)
	if !strings.Contains(r.Stderr, "is no longer valid") || len(w.Srv.Requests(fetchtest.ImgName)) != 1 {
		t.Fatalf("damaged cache not re-downloaded once:\n%s", r.Stderr)
	}
	fetchtest.MustHave(t, cached, w.Cur.Content)
}

// The cache is no way around verification: with another keyring the cached DIGESTS no longer
// verify, the fresh download is checked too, and the fetch fails.
func TestFetchCacheHonoursKeyring(t *testing.T) {
	w := fetchtest.NewWorld(t)
	w.Run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	other := filepath.Join(w.Base, "other.asc")
	os.WriteFile(other, newKeyArmored(t), 0o644)
	w.Run(t, "fetch", "--output-file", "b.img", "--keyring", other).MustFail(t, 1, "which is not in the keyring "+other)
	if _, err := os.Stat(filepath.Join(w.Dir, "b.img")); err == nil {
		t.Fatal("output written despite the failed verification")
	}
}

// Kept bytes that are wrong (not just short) fail the digest; the download restarts from byte 0.
func TestFetchBadPartialRestartsFromZero(t *testing.T) {
	w := fetchtest.NewWorld(t)
	dir := filepath.Join(w.Cache, "amd64-usr", fetchtest.CurrentVersion)
	os.MkdirAll(dir, 0o700)
	junk := make([]byte, len(w.Cur.Content)/2)
	os.WriteFile(filepath.Join(dir, fetchtest.ImgName+".partial"), junk, 0o600)
	r := w.RunWithNotes(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "out.img"), w.Cur.Content)
	reqs := w.Srv.Requests(fetchtest.ImgName)
	if len(reqs) != 2 || reqs[0].Range == "" || reqs[1].Range != "" {
		t.Fatalf("requests %+v, want a resume then a full download", reqs)
	}
	if !strings.Contains(r.Stderr, "downloading it again from the start") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
}

// Without a terminal, progress is plain lines (no carriage returns) on stderr.
func TestFetchProgressInPipe(t *testing.T) {
	w := fetchtest.NewWorld(t)
	r := w.RunWithNotes(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	if strings.Contains(r.Stderr, "\r") || !strings.Contains(r.Stderr, "Downloading ") {
		t.Fatalf("stderr in a pipe: %q", r.Stderr)
	}
	r = w.Run(t, "fetch", "--output-file", "out2.img").MustSucceed(t) // --quiet
	if r.Stderr != "" {
		t.Fatalf("--quiet printed: %q", r.Stderr)
	}
}

// Every bad input fails with a message that names the problem, a non-zero exit code, nothing at
// the output path and nothing unverified in the cache.
func TestFetchBadInput(t *testing.T) {
	dir := "/stable/amd64-usr/" + fetchtest.CurrentVersion + "/"
	img, bz2 := dir+fetchtest.ImgName, dir+fetchtest.ImgName+".bz2"
	oldBz2 := "/stable/amd64-usr/" + fetchtest.OldVersion + "/" + fetchtest.ImgName + ".bz2"
	resign := func(t *testing.T, w *fetchtest.World, path string, data []byte) {
		w.Srv.PublishFile(t, w.Cur, path, data)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, w *fetchtest.World)
		args  []string
		code  int
		want  []string
	}{
		{"unknown channel", nil, []string{"--channel", "edge"}, 2, []string{`unknown channel "edge"`, "stable, beta, alpha, lts"}},
		{"unknown arch", nil, []string{"--arch", "riscv"}, 2, []string{`unknown arch "riscv"`, "amd64, arm64"}},
		{"unknown image", nil, []string{"--image", "vmware"}, 2, []string{`unknown image "vmware"`, "qemu, qemu_uefi, openstack"}},
		{"malformed version", nil, []string{"--version", "latest"}, 2, []string{`invalid version "latest"`}},
		{"unknown compression", nil, []string{"--compression", "xz"}, 2, []string{"auto, none or bz2"}},
		{"version not on the server", nil, []string{"--version", "1.2.3"}, 1,
			[]string{"version 1.2.3 does not exist on the stable channel", "/stable/amd64-usr/1.2.3/version.txt", "404"}},
		{"image missing on the server", func(t *testing.T, w *fetchtest.World) {
			for _, p := range []string{img, bz2} {
				w.Srv.Remove(p)
				w.Srv.Remove(p + ".DIGESTS.asc")
			}
		}, nil, 1, []string{"has no qemu image", "404 for " + w0 + img + " and " + w0 + bz2}},
		{"server error on the image", func(t *testing.T, w *fetchtest.World) { w.Srv.SetStatus(img, 503) }, nil, 1,
			[]string{img, "503 Service Unavailable", "after 2 attempts"}},
		{"server error on version.txt", func(t *testing.T, w *fetchtest.World) {
			w.Srv.SetStatus("/stable/amd64-usr/current/version.txt", 500)
		}, nil, 1, []string{"/stable/amd64-usr/current/version.txt", "500 Internal Server Error"}},
		{"connection dropped on every try", func(t *testing.T, w *fetchtest.World) { w.Srv.DropAt(img, 1000, -1) }, nil, 1,
			[]string{"failed at byte 1000 of", "after 2 attempts", "run the same command again to resume"}},
		{"tampered image", func(t *testing.T, w *fetchtest.World) {
			b := append([]byte{}, w.Cur.Content...)
			b[len(b)/2] ^= 1
			w.Srv.Put(img, b)
		}, nil, 1, []string{"SHA512 of " + w0 + img, "does not match the signed DIGESTS"}},
		{"DIGESTS signed by another key", func(t *testing.T, w *fetchtest.World) {
			other := fetchtest.NewKey(t, "Mallory", time.Now())
			w.Srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(fetchtest.ImgName, w.Cur.Content), other.Current, time.Now(), 0))
		}, nil, 1, []string{img + ".DIGESTS.asc", "which is not in the keyring"}},
		{"DIGESTS altered after signing", func(t *testing.T, w *fetchtest.World) {
			asc := strings.Replace(string(w.Srv.Get(img+".DIGESTS.asc")), "# SHA1 HASH\n", "# SHA1 HASH\n0000  other\n", 1)
			w.Srv.Put(img+".DIGESTS.asc", []byte(asc))
		}, nil, 1, []string{"OpenPGP verification failed", "altered"}},
		{"signature missing", func(t *testing.T, w *fetchtest.World) { w.Srv.Remove(oldBz2 + ".DIGESTS.asc") },
			[]string{"--version", fetchtest.OldVersion}, 1, []string{oldBz2 + " is published without its signed digests", oldBz2 + ".DIGESTS.asc", "404"}},
		{"DIGESTS not signed", func(t *testing.T, w *fetchtest.World) { w.Srv.Put(img+".DIGESTS.asc", w.Srv.Get(img+".DIGESTS")) }, nil, 1,
			[]string{"not a clear-signed OpenPGP message"}},
		{"expired signature", func(t *testing.T, w *fetchtest.World) {
			w.Srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(fetchtest.ImgName, w.Cur.Content), w.Key.Current, time.Now().Add(-48*time.Hour), time.Hour))
		}, nil, 1, []string{"the signature expired on"}},
		{"revoked subkey", func(t *testing.T, w *fetchtest.World) {
			w.Srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(fetchtest.ImgName, w.Cur.Content), w.Key.Revoked, time.Now().Add(-48*time.Hour), 0))
		}, nil, 1, []string{"has been revoked"}},
		{"subkey expired before signing", func(t *testing.T, w *fetchtest.World) {
			w.Srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(fetchtest.ImgName, w.Cur.Content), w.Key.Expired, time.Now().Add(-time.Hour), 0))
		}, nil, 1, []string{"was expired"}},
		{"truncated bz2 (published so)", func(t *testing.T, w *fetchtest.World) {
			b := w.Srv.Get(bz2)
			resign(t, w, bz2, b[:len(b)*2/3])
		}, []string{"--compression", "bz2"}, 1, []string{"not valid bzip2", "the file on the server is damaged"}},
		{"corrupt bz2 (published so)", func(t *testing.T, w *fetchtest.World) {
			b := append([]byte{}, w.Srv.Get(bz2)...)
			b[len(b)/2] ^= 0x40
			resign(t, w, bz2, b)
		}, []string{"--compression", "bz2"}, 1, []string{"not valid bzip2", "the file on the server is damaged"}},
		{"truncated bz2 in transit", func(t *testing.T, w *fetchtest.World) {
			b := w.Srv.Get(bz2)
			w.Srv.Put(bz2, b[:len(b)/2])
		}, []string{"--compression", "bz2"}, 1, []string{"does not match the signed DIGESTS"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := fetchtest.NewWorld(t)
			if tc.setup != nil {
				tc.setup(t, w)
			}
			want := make([]string, len(tc.want))
			for i, s := range tc.want {
				want[i] = strings.ReplaceAll(s, w0, w.Srv.URL)
			}
			for i, s := range want {
				if strings.HasPrefix(s, "/stable/") {
					want[i] = w.Srv.URL + s
				}
			}
			w.Run(t, "fetch", tc.args...).MustFail(t, tc.code, want...)
			mustBeEmpty(t, w.Dir)
			if c := cachedFiles(t, w.Cache); len(c) != 0 {
				t.Fatalf("cached after a failure: %v", c)
			}
		})
	}
}

// w0 stands for the server URL in expected messages, filled in per test.
const w0 = "\x01SERVER\x01"

// --insecure-skip-verify takes a tampered image, says so loudly even with --quiet, and caches nothing.
func TestFetchInsecureSkipVerify(t *testing.T) {
	w := fetchtest.NewWorld(t)
	img := "/stable/amd64-usr/" + fetchtest.CurrentVersion + "/" + fetchtest.ImgName
	b := append([]byte{}, w.Cur.Content...)
	b[10] ^= 1
	w.Srv.Put(img, b)
	w.Srv.Remove(img + ".DIGESTS.asc")
	r := w.Run(t, "fetch", "--insecure-skip-verify", "--output-file", "x.img").MustSucceed(t)
	if !strings.Contains(r.Stderr, "WARNING: --insecure-skip-verify") || !strings.Contains(r.Stdout, "NOT verified") {
		t.Fatalf("not loud enough:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	fetchtest.MustHave(t, filepath.Join(w.Dir, "x.img"), b)
	if c := cachedFiles(t, w.Cache); len(c) != 0 {
		t.Fatalf("insecure download cached: %v", c)
	}
}

// A full disk fails the fetch with the output path named and nothing left behind.
func TestFetchDiskFull(t *testing.T) {
	testutil.RequireRoot(t, "mounting a small tmpfs")
	w := fetchtest.NewWorld(t)
	small := filepath.Join(w.Base, "small")
	os.Mkdir(small, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small).CombinedOutput(); err != nil {
		testutil.RequireEnv(t, fmt.Errorf("%v %s", err, out), "mounting a 1 MiB tmpfs")
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	out := filepath.Join(small, "flatcar.img")
	w.Run(t, "fetch", "--output-file", out).MustFail(t, 1, "writing "+out, "no space left on device")
	mustBeEmpty(t, small)
	// The bytes already downloaded stay resumable; nothing unverified is cached.
	if c := cachedFiles(t, w.Cache); len(c) != 0 {
		t.Fatalf("cached after a failure: %v", c)
	}
}

// An output directory the user cannot write to fails before any download.
func TestFetchOutputNotWritable(t *testing.T) {
	testutil.RequireRoot(t, "dropping privileges")
	w := fetchtest.NewWorld(t)
	os.Chmod(w.Dir, 0o755) // root-owned: nobody cannot create files in it
	os.MkdirAll(w.Cache, 0o777)
	os.Chmod(w.Cache, 0o777)
	out := filepath.Join(w.Dir, "flatcar.img")
	testutil.RunCmd(t, testutil.Cmd{Args: w.Args("fetch", "--output-file", out), Prefix: testutil.AsNobody}).
		MustFail(t, 1, "cannot write "+out+": no write permission in "+w.Dir, "permission denied")
	mustBeEmpty(t, w.Dir)
	if n := len(w.Srv.Requests(".img")); n != 0 {
		t.Fatalf("downloaded %d times although the output cannot be written", n)
	}
}

// through serves the world's release server behind a fault-injecting one.
func through(t *testing.T, w *fetchtest.World) *faultServer {
	return newFaultServer(t, w.Srv.Config.Handler)
}

func fetchCmd(w *fetchtest.World, srv *faultServer, out string, env ...string) testutil.Cmd {
	return testutil.Cmd{Args: w.Args("fetch", "--release-server", srv.URL+"/{channel}", "--output-file", out),
		Dir: w.Dir, Env: env, Timeout: 3 * time.Minute}
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
	w := fetchtest.NewWorld(t)
	srv := through(t, w)
	release := srv.Hold(fetchtest.ImgName, 1<<20)
	defer release()
	first, second := make(chan testutil.Result, 1), make(chan testutil.Result, 1)
	go func() { first <- testutil.RunCmd(t, fetchCmd(w, srv, "a.img")) }()
	waitFor(t, "the first download", func() bool { return srv.Hits(w.Cur.ImgPath()) == 1 })
	go func() { second <- testutil.RunCmd(t, fetchCmd(w, srv, "b.img")) }()
	waitFor(t, "the second fetch to resolve", func() bool { return srv.Hits("/stable/amd64-usr/current/version.txt") == 2 })
	time.Sleep(2 * time.Second) // the second run is at the cache lock now
	release()
	(<-first).MustSucceed(t)
	r := (<-second).MustSucceed(t)
	if !strings.Contains(r.Stderr, "another flatcar-capo is downloading or reading "+fetchtest.ImgName) || !strings.Contains(r.Stderr, "waiting for it (at most 30m0s)") {
		t.Errorf("the second fetch did not say it waits:\n%s", r.Stderr)
	}
	fetchtest.MustHave(t, filepath.Join(w.Dir, "a.img"), w.Cur.Content)
	fetchtest.MustHave(t, filepath.Join(w.Dir, "b.img"), w.Cur.Content)
	if n := srv.Hits(w.Cur.ImgPath()); n != 1 {
		t.Errorf("%d image downloads, want 1 (the second run reads the cache)", n)
	}
}

// Reading a verified cache entry takes a shared lock: it runs beside another reader. A writer
// holding the lock longer than --download-timeout ends the wait with a clear error.
func TestFetchCacheLockSharedAndBounded(t *testing.T) {
	t.Parallel() // its own world; it waits on locks and timeouts
	w := fetchtest.NewWorld(t)
	w.Run(t, "fetch", "--output-file", "a.img").MustSucceed(t)
	lock, err := os.Open(filepath.Join(w.Cache, "amd64-usr", fetchtest.CurrentVersion, fetchtest.ImgName+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil { // another reader
		t.Fatal(err)
	}
	r := w.Run(t, "fetch", "--output-file", "b.img", "-o", "json").MustSucceed(t)
	if !strings.Contains(r.Stdout, `"cached": true`) || strings.Contains(r.Stderr, "waiting") {
		t.Fatalf("a cache hit beside another reader:\n%s%s", r.Stdout, r.Stderr)
	}
	fetchtest.MustHave(t, filepath.Join(w.Dir, "b.img"), w.Cur.Content)

	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil { // a stuck writer
		t.Fatal(err)
	}
	start := time.Now()
	c := testutil.Cmd{Args: w.Args("fetch", "--output-file", "c.img"), Dir: w.Dir, Env: []string{"FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s"}, Timeout: time.Minute}
	testutil.RunCmd(t, c).MustFail(t, 1, "waiting for it (at most 2s)", "has held", fetchtest.ImgName+".lock", "--download-timeout", "--cache-dir")
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("gave up after %s, before the 2s bound", took)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "c.img")); err == nil {
		t.Error("output written after the failed wait")
	}
}

// A server that trickles (a byte every 20 ms: never a stall, never done) fails the fetch at
// --download-timeout, naming the URL, with the bytes kept for a resume; no output. Before, the
// retry budget reset on every byte and the fetch ran for hours.
func TestFetchTrickleHitsDownloadTimeout(t *testing.T) {
	t.Parallel() // its own world; it waits on locks and timeouts
	w := fetchtest.NewWorld(t)
	srv := through(t, w)
	srv.Trickle(fetchtest.ImgName, 20*time.Millisecond)
	start := time.Now()
	r := testutil.RunCmd(t, fetchCmd(w, srv, "out.img", "FLATCAR_CAPO_DOWNLOAD_TIMEOUT=2s", "FLATCAR_CAPO_STALL_TIMEOUT=1s"))
	r.MustFail(t, 1, srv.URL+w.Cur.ImgPath(), "not finished after 2s", "--download-timeout", ".partial", "run the same command again to resume")
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("the trickle was stopped only after %s", took)
	}
	mustBeEmpty(t, w.Dir)
}
