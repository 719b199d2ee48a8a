package fetch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// Every bad input fails with a message that names the problem, a non-zero exit code, nothing at
// the output path and nothing unverified in the cache.
func TestFetchBadInput(t *testing.T) {
	dir := "/stable/amd64-usr/" + currentVersion + "/"
	img, bz2 := dir+imgName, dir+imgName+".bz2"
	oldBz2 := "/stable/amd64-usr/" + oldVersion + "/" + imgName + ".bz2"
	resign := func(t *testing.T, w *world, path string, data []byte) {
		w.srv.PublishFile(t, w.cur, path, data)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, w *world)
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
		{"image missing on the server", func(t *testing.T, w *world) {
			for _, p := range []string{img, bz2} {
				w.srv.Remove(p)
				w.srv.Remove(p + ".DIGESTS.asc")
			}
		}, nil, 1, []string{"has no qemu image", "404 for " + w0 + img + " and " + w0 + bz2}},
		{"server error on the image", func(t *testing.T, w *world) { w.srv.SetStatus(img, 503) }, nil, 1,
			[]string{img, "503 Service Unavailable", "after 2 attempts"}},
		{"server error on version.txt", func(t *testing.T, w *world) {
			w.srv.SetStatus("/stable/amd64-usr/current/version.txt", 500)
		}, nil, 1, []string{"/stable/amd64-usr/current/version.txt", "500 Internal Server Error"}},
		{"connection dropped on every try", func(t *testing.T, w *world) { w.srv.DropAt(img, 1000, -1) }, nil, 1,
			[]string{"failed at byte 1000 of", "after 2 attempts", "run the same command again to resume"}},
		{"tampered image", func(t *testing.T, w *world) {
			b := append([]byte{}, w.cur.Content...)
			b[len(b)/2] ^= 1
			w.srv.Put(img, b)
		}, nil, 1, []string{"SHA512 of " + w0 + img, "does not match the signed DIGESTS"}},
		{"DIGESTS signed by another key", func(t *testing.T, w *world) {
			other := fetchtest.NewKey(t, "Mallory", time.Now())
			w.srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(imgName, w.cur.Content), other.Current, time.Now(), 0))
		}, nil, 1, []string{img + ".DIGESTS.asc", "which is not in the keyring"}},
		{"DIGESTS altered after signing", func(t *testing.T, w *world) {
			asc := strings.Replace(string(w.srv.Get(img+".DIGESTS.asc")), "# SHA1 HASH\n", "# SHA1 HASH\n0000  other\n", 1)
			w.srv.Put(img+".DIGESTS.asc", []byte(asc))
		}, nil, 1, []string{"OpenPGP verification failed", "altered"}},
		{"signature missing", func(t *testing.T, w *world) { w.srv.Remove(oldBz2 + ".DIGESTS.asc") },
			[]string{"--version", oldVersion}, 1, []string{oldBz2 + " is published without its signed digests", oldBz2 + ".DIGESTS.asc", "404"}},
		{"DIGESTS not signed", func(t *testing.T, w *world) { w.srv.Put(img+".DIGESTS.asc", w.srv.Get(img+".DIGESTS")) }, nil, 1,
			[]string{"not a clear-signed OpenPGP message"}},
		{"expired signature", func(t *testing.T, w *world) {
			w.srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(imgName, w.cur.Content), w.key.Current, time.Now().Add(-48*time.Hour), time.Hour))
		}, nil, 1, []string{"the signature expired on"}},
		{"revoked subkey", func(t *testing.T, w *world) {
			w.srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(imgName, w.cur.Content), w.key.Revoked, time.Now().Add(-48*time.Hour), 0))
		}, nil, 1, []string{"has been revoked"}},
		{"subkey expired before signing", func(t *testing.T, w *world) {
			w.srv.Put(img+".DIGESTS.asc", fetchtest.ClearSign(t, fetchtest.Digests(imgName, w.cur.Content), w.key.Expired, time.Now().Add(-time.Hour), 0))
		}, nil, 1, []string{"was expired"}},
		{"truncated bz2 (published so)", func(t *testing.T, w *world) {
			b := w.srv.Get(bz2)
			resign(t, w, bz2, b[:len(b)*2/3])
		}, []string{"--compression", "bz2"}, 1, []string{"not valid bzip2", "the file on the server is damaged"}},
		{"corrupt bz2 (published so)", func(t *testing.T, w *world) {
			b := append([]byte{}, w.srv.Get(bz2)...)
			b[len(b)/2] ^= 0x40
			resign(t, w, bz2, b)
		}, []string{"--compression", "bz2"}, 1, []string{"not valid bzip2", "the file on the server is damaged"}},
		{"truncated bz2 in transit", func(t *testing.T, w *world) {
			b := w.srv.Get(bz2)
			w.srv.Put(bz2, b[:len(b)/2])
		}, []string{"--compression", "bz2"}, 1, []string{"does not match the signed DIGESTS"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			if tc.setup != nil {
				tc.setup(t, w)
			}
			want := make([]string, len(tc.want))
			for i, s := range tc.want {
				want[i] = strings.ReplaceAll(s, w0, w.srv.URL)
			}
			for i, s := range want {
				if strings.HasPrefix(s, "/stable/") {
					want[i] = w.srv.URL + s
				}
			}
			w.run(t, "fetch", tc.args...).MustFail(t, tc.code, want...)
			mustBeEmpty(t, w.dir)
			if c := cachedFiles(t, w.cache); len(c) != 0 {
				t.Fatalf("cached after a failure: %v", c)
			}
		})
	}
}

// w0 stands for the server URL in expected messages, filled in per test.
const w0 = "\x01SERVER\x01"

// --insecure-skip-verify takes a tampered image, says so loudly even with --quiet, and caches nothing.
func TestFetchInsecureSkipVerify(t *testing.T) {
	w := newWorld(t)
	img := "/stable/amd64-usr/" + currentVersion + "/" + imgName
	b := append([]byte{}, w.cur.Content...)
	b[10] ^= 1
	w.srv.Put(img, b)
	w.srv.Remove(img + ".DIGESTS.asc")
	r := w.run(t, "fetch", "--insecure-skip-verify", "--output-file", "x.img").MustSucceed(t)
	if !strings.Contains(r.Stderr, "WARNING: --insecure-skip-verify") || !strings.Contains(r.Stdout, "NOT verified") {
		t.Fatalf("not loud enough:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	mustHave(t, filepath.Join(w.dir, "x.img"), b)
	if c := cachedFiles(t, w.cache); len(c) != 0 {
		t.Fatalf("insecure download cached: %v", c)
	}
}

// A full disk fails the fetch with the output path named and nothing left behind.
func TestFetchDiskFull(t *testing.T) {
	testutil.RequireRoot(t, "mounting a small tmpfs")
	w := newWorld(t)
	small := filepath.Join(w.base, "small")
	os.Mkdir(small, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small).CombinedOutput(); err != nil {
		testutil.RequireEnv(t, fmt.Errorf("%v %s", err, out), "mounting a 1 MiB tmpfs")
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	out := filepath.Join(small, "flatcar.img")
	w.run(t, "fetch", "--output-file", out).MustFail(t, 1, "writing "+out, "no space left on device")
	mustBeEmpty(t, small)
	// The bytes already downloaded stay resumable; nothing unverified is cached.
	if c := cachedFiles(t, w.cache); len(c) != 0 {
		t.Fatalf("cached after a failure: %v", c)
	}
}

// An output directory the user cannot write to fails before any download.
func TestFetchOutputNotWritable(t *testing.T) {
	testutil.RequireRoot(t, "dropping privileges")
	w := newWorld(t)
	os.Chmod(w.dir, 0o755) // root-owned: nobody cannot create files in it
	os.MkdirAll(w.cache, 0o777)
	os.Chmod(w.cache, 0o777)
	out := filepath.Join(w.dir, "flatcar.img")
	testutil.RunCmd(t, testutil.Cmd{Args: w.args("fetch", "--output-file", out), Prefix: testutil.AsNobody}).
		MustFail(t, 1, "cannot write "+out+": no write permission in "+w.dir, "permission denied")
	mustBeEmpty(t, w.dir)
	if n := len(w.srv.Requests(".img")); n != 0 {
		t.Fatalf("downloaded %d times although the output cannot be written", n)
	}
}
