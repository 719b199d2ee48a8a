package cli_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/cli"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

const fullSize = 64 << 20 // the tmpfs every writing command fills

// TestDiskFull runs every command that writes onto a 64 MiB tmpfs that has room for only half
// of what the command writes, with GOMAXPROCS 1, 2 and 8 (the qcow2 -> raw copy once hung there
// with fewer than 4 CPUs): each must fail within a bound with exit 1 and a message that says
// "no space left on device" and names the path the user gave, leave no temporary file, and
// leave its input byte for byte as it was. In this process, to stay cheap.
func TestDiskFull(t *testing.T) {
	testutil.RequireRoot(t, "mounting a 64 MiB tmpfs to fill")
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	work := t.TempDir()
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	// 12 MiB of data in ROOT's unused blocks (near the end of the disk, before the backup GPT):
	// every output then needs more than the tmpfs has, with many pieces in flight. Half random
	// (4 bits a byte), so the compressed qcow2 input, like a release's, costs inflate time.
	noise := make([]byte, 12<<20)
	rand.New(rand.NewSource(1)).Read(noise)
	for i := range noise {
		noise[i] &= 0x0f
	}
	f, err := os.OpenFile(base, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt(noise, st.Size()-40<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ext4 := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, OEM: flatcardisk.OEMExt4})
	qcow := filepath.Join(work, "base.qcow2")
	mustRun(t, "convert", "--compress", base, qcow)

	mirror := kubetest.New(t, kubernetes.Options{})
	prebuilt := filepath.Join(work, "kubernetes.raw")
	mustRun(t, append([]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--output-file", prebuilt}, mirror.Args()...)...)

	srv := fetchtest.NewServer(t)
	key := fetchtest.NewKey(t, "Test Buildbot", time.Now())
	keyring := filepath.Join(work, "keyring.asc")
	if err := os.WriteFile(keyring, key.PublicArmored(t), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: "4230.2.3", Image: "qemu",
		Content: noise, Signer: key.Current, Key: key, SignedAt: time.Now().Add(-time.Hour), Current: true, WithoutBZ2: true})
	// An old release, .bz2 only: its decoder writes into the full output.
	srv.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: "3510.2.8", Image: "qemu",
		Content: noise[:8<<20], Signer: key.Current, Key: key, SignedAt: time.Now().Add(-time.Hour), WithoutImg: true})
	fetchArgs := []string{"fetch", "--release-server", srv.ReleaseServer(), "--keyring", keyring, "--quiet", "--retries", "0"}

	mnt := filepath.Join(work, "full")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.RequireEnv(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", fullSize)), "mounting a 64 MiB tmpfs")
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })

	// Each case writes into mnt (already holding what onTmpfs copies there) and names the path
	// the error must mention; inputs are hashed before and after.
	type tcase struct {
		name    string
		onTmpfs string // an input copied onto the tmpfs first (edited in place)
		room    int64  // bytes left free on the tmpfs: about half of what the command writes (default 3 MiB)
		inPlace bool   // edits onTmpfs in place: must succeed without allocating a block
		args    func(in string) []string
		path    func(in string) string
		inputs  []string
	}
	out := func(name string) string { return filepath.Join(mnt, name) }
	cases := []tcase{
		{name: "convert raw to qcow2", inputs: []string{base},
			args: func(string) []string { return []string{"convert", base, out("o.qcow2")} },
			path: func(string) string { return out("o.qcow2") }},
		{name: "convert raw to compressed qcow2", inputs: []string{base},
			args: func(string) []string { return []string{"convert", "--compress", base, out("o.qcow2")} },
			path: func(string) string { return out("o.qcow2") }},
		{name: "convert qcow2 to raw", inputs: []string{qcow},
			args: func(string) []string { return []string{"convert", qcow, out("o.raw")} },
			path: func(string) string { return out("o.raw") }},
		{name: "oem set qcow2 into a raw output file", inputs: []string{qcow},
			args: func(string) []string {
				return []string{"oem", "set", qcow, "--id", "openstack", "--output-file", out("o.raw")}
			},
			path: func(string) string { return out("o.raw") }},
		{name: "oem set raw into a compressed qcow2 output file", inputs: []string{base},
			args: func(string) []string {
				return []string{"oem", "set", base, "--id", "openstack", "--output-file", out("o.qcow2"), "--compress"}
			},
			path: func(string) string { return out("o.qcow2") }},
		{name: "oem set in place", onTmpfs: base, inPlace: true,
			args: func(in string) []string { return []string{"oem", "set", in, "--id", "openstack"} },
			path: func(in string) string { return in }},
		{name: "oem set in place, ext4 OEM", onTmpfs: ext4, inPlace: true,
			args: func(in string) []string { return []string{"oem", "set", in, "--id", "openstack"} },
			path: func(in string) string { return in }},
		{name: "sysext create", inputs: []string{prebuilt}, room: 1, // its squashfs of stand-in binaries is a few KiB (the rest is padding holes)
			args: func(string) []string {
				return append([]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--output-file", out("k.raw")}, mirror.Args()...)
			},
			path: func(string) string { return out("k.raw") }},
		// Its artifact is ~1.4 MiB: the ROOT rebuilt on a copy-on-write overlay drops the noise
		// in ROOT's free blocks, and no raw work copy is written (issue 20), so leave less room.
		{name: "build --method sysext", inputs: []string{qcow, prebuilt}, room: 512 << 10,
			args: func(string) []string {
				return []string{"build", "--method", "sysext", "--base-image", qcow, "--version", "4459.2.0", "--kubernetes-version", "v1.33.4", "--sysext", prebuilt, "--no-preload-images",
					"--cache-dir", filepath.Join(work, "build-cache"), "--output-dir", out("build"),
					"--kubernetes-mirror", "http://127.0.0.1:9/release", "--github-mirror", "http://127.0.0.1:9"}
			},
			path: func(string) string { return out("build") }},
		{name: "fetch into a full output", args: func(string) []string {
			return append(fetchArgs, "--cache-dir", filepath.Join(work, "fetch-cache"), "--output-file", out("f.img"))
		}, path: func(string) string { return out("f.img") }},
		{name: "fetch and bzip2-decode into a full output", args: func(string) []string {
			return append(fetchArgs, "--version", "3510.2.8", "--cache-dir", filepath.Join(work, "fetch-cache"), "--output-file", out("f.img"))
		}, path: func(string) string { return out("f.img") }},
		{name: "fetch into a full cache", args: func(string) []string {
			return append(fetchArgs, "--cache-dir", out("cache"), "--output-file", filepath.Join(work, "f.img"))
		}, path: func(string) string { return out("cache") }},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range cases {
		for _, procs := range []int{1, 2, 8} {
			t.Run(fmt.Sprintf("%s/GOMAXPROCS=%d", c.name, procs), func(t *testing.T) {
				clearDir(t, mnt)
				in := ""
				if c.onTmpfs != "" {
					in = out(filepath.Base(c.onTmpfs))
					// data extents only, so a 600 MiB sparse image fits the tmpfs
					if err := flatcardisk.CopySparse(c.onTmpfs, in); err != nil {
						t.Fatal(err)
					}
				}
				inputs := append([]string{}, c.inputs...)
				if in != "" {
					inputs = append(inputs, in)
				}
				sums := map[string]string{}
				for _, p := range inputs {
					sums[p] = testutil.SHA256File(t, p)
				}
				var blocksBefore int64
				if c.inPlace {
					blocksBefore = blocks(t, in)
				}
				room := c.room
				if room == 0 && !c.inPlace {
					room = 3 << 20
				}
				fill(t, mnt, room)
				before := listDir(t, mnt)
				runtime.GOMAXPROCS(procs)
				code, stderr := runInProcess(t, time.Minute, c.args(in)...)
				runtime.GOMAXPROCS(8)
				if c.inPlace {
					// The OEM edit rewrites blocks the image already has (btrfs leaves in place, the
					// GPT), so a full disk does not stop it; growing the file would.
					if after := blocks(t, in); code != 0 || after != blocksBefore {
						t.Errorf("exit %d, blocks %d -> %d: an in-place edit must succeed on a full disk without allocating; stderr:\n%s", code, blocksBefore, after, stderr)
					}
					return
				}
				if code != 1 || !strings.Contains(stderr, "no space left on device") || !strings.Contains(stderr, c.path(in)) {
					t.Errorf("exit %d, want 1 with \"no space left on device\" naming %s; stderr:\n%s", code, c.path(in), stderr)
				}
				if after := listDir(t, mnt); after != before {
					t.Errorf("left behind on the full disk:\nbefore: %s\nafter:  %s", before, after)
				}
				for _, p := range inputs {
					if testutil.SHA256File(t, p) != sums[p] {
						t.Errorf("input %s changed", p)
					}
				}
			})
		}
	}
}

func mustRun(t *testing.T, args ...string) {
	t.Helper()
	if code, stderr := runInProcess(t, 2*time.Minute, args...); code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, stderr)
	}
}

// runInProcess runs the CLI here; a run past timeout fails the test (it cannot be killed).
func runInProcess(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- cli.Run(args, io.Discard, &stderr) }()
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(timeout):
		t.Fatalf("%v still running after %v: it hangs", args, timeout)
		return 0, ""
	}
}

// fill leaves room bytes free on the tmpfs at dir.
func fill(t *testing.T, dir string, room int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, free-room); err != nil {
		t.Fatal(err)
	}
}

func clearDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// listDir names every file under dir with its size, for a before/after comparison.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		// Lock files stay by design (fetch's per-artifact ones, build's .NAME.lock with a pid):
		// removing one would let a third run lock a new file while a second holds the old one.
		if err == nil && !info.IsDir() && !(strings.HasSuffix(p, ".lock") && info.Size() <= 16) {
			fmt.Fprintf(&b, "%s(%d) ", strings.TrimPrefix(p, dir+"/"), info.Size())
		}
		return nil
	})
	return b.String()
}

// blocks is the space p takes, in 512-byte blocks.
func blocks(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks
}
