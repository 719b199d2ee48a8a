package rootfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

var e2tools = []string{"mkfs.ext4", "e2fsck", "debugfs", "dumpe2fs", "resize2fs"}

// run runs a tool and fails the test with its output when it fails.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// image returns a Flatcar-layout disk (t.TempDir) of diskSize bytes whose ROOT is made by
// `mkfs.ext4 -d staging` with Flatcar's options, then edited with debugfs commands (owners,
// times, device nodes, xattrs: no root needed). staging "" keeps the fixture's empty ROOT.
func image(t testing.TB, diskSize int64, staging string, debugfsCmds ...string) string {
	t.Helper()
	testutil.RequireTools(t, e2tools...)
	img := flatcardisk.Build(t, flatcardisk.Options{DiskSize: diskSize}) // 0: the 600 MiB default
	if staging == "" && len(debugfsCmds) == 0 {
		return img
	}
	start, size := rootRange(t, img)
	fsFile := filepath.Join(t.TempDir(), "root.ext4")
	f, err := os.Create(fsFile)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	args := []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-i", "4096", "-I", "256", "-L", "ROOT"}
	if staging != "" {
		args = append(args, "-d", staging)
	}
	run(t, "mkfs.ext4", append(args, fsFile)...)
	if len(debugfsCmds) > 0 {
		cmds := filepath.Join(t.TempDir(), "debugfs.cmds")
		os.WriteFile(cmds, []byte(strings.Join(debugfsCmds, "\n")+"\n"), 0o644)
		out := run(t, "debugfs", "-w", "-f", cmds, fsFile)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, ": ") && !strings.HasPrefix(l, "debugfs ") && !strings.HasPrefix(l, "debugfs:") && !strings.HasPrefix(l, "Allocated inode") {
				t.Fatalf("debugfs: %s\n%s", l, out)
			}
		}
	}
	content, err := os.ReadFile(fsFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.WriteAt(content, start); err != nil {
		t.Fatal(err)
	}
	return img
}

func rootRange(t testing.TB, img string) (start, size int64) {
	t.Helper()
	d, err := disk.Open(img, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.FindPartition("ROOT")
	if err != nil {
		t.Fatal(err)
	}
	return p.Start, p.Size
}

// extractRoot copies the ROOT partition of img into a sparse file of its own (for e2fsck,
// debugfs, resize2fs, which take a whole device).
func extractRoot(t testing.TB, img string) string {
	t.Helper()
	start, size := rootRange(t, img)
	in, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), "root.ext4")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	out.Truncate(size)
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for off := int64(0); off < size; off += int64(len(buf)) {
		n, err := in.ReadAt(buf[:min(int64(len(buf)), size-off)], start+off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path
}

// fsck runs e2fsck -fn and fails the test unless the filesystem is clean.
func fsck(t testing.TB, fsFile, when string) {
	t.Helper()
	out, err := exec.Command("e2fsck", "-fn", fsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", when, err, out)
	}
}

type inodeInfo struct {
	Type       string
	Mode       int64
	UID, GID   int
	Mtime      int64
	Size       int64
	LinkTarget string
}

var (
	reType  = regexp.MustCompile(`Type: (\S+)\s+Mode:\s+(\d+)`)
	reOwner = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`)
	reSize  = regexp.MustCompile(`Size: (\d+)`)
	reMtime = regexp.MustCompile(`mtime: 0x([0-9a-f]+)`)
	reLink  = regexp.MustCompile(`Fast link dest: "(.*)"`)
)

// stat reads an inode with debugfs (e2fsprogs' reading, not ours).
func stat(t testing.TB, fsFile, p string) inodeInfo {
	t.Helper()
	out := run(t, "debugfs", "-R", "stat "+p, fsFile)
	m := reType.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("debugfs stat %s: %s", p, out)
	}
	var in inodeInfo
	in.Type = m[1]
	in.Mode, _ = strconv.ParseInt(m[2], 8, 64)
	if o := reOwner.FindStringSubmatch(out); o != nil {
		in.UID, _ = strconv.Atoi(o[1])
		in.GID, _ = strconv.Atoi(o[2])
	}
	if s := reSize.FindStringSubmatch(out); s != nil {
		in.Size, _ = strconv.ParseInt(s[1], 10, 64)
	}
	if s := reMtime.FindStringSubmatch(out); s != nil {
		in.Mtime, _ = strconv.ParseInt(s[1], 16, 64)
	}
	if s := reLink.FindStringSubmatch(out); s != nil {
		in.LinkTarget = s[1]
	}
	return in
}

// dumpSum extracts a file with debugfs and returns its sha256.
func dumpSum(t testing.TB, fsFile, p string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump")
	run(t, "debugfs", "-R", "dump "+p+" "+out, fsFile)
	return fileSum(t, out)
}

func fileSum(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// randomFile writes n pseudo-random (incompressible, deterministic) bytes.
func randomFile(t testing.TB, n int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sysext.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, r, n); err != nil {
		t.Fatal(err)
	}
	return p
}

// dirListing lists a directory of the temp dir, to show nothing was left behind.
func dirListing(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}
