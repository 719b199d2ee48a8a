// Package rootfstest has the e2fsprogs-based checks of a baked ROOT that the rootfs, build and
// boot tests share: extract partition 9, e2fsck -fn, debugfs stat/dump (e2fsprogs' reading, not ours).
package rootfstest

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// RootRange is the byte range of the partition named ROOT.
func RootRange(t testing.TB, img string) (start, size int64) {
	t.Helper()
	start, size, err := flatcardisk.PartitionRange(img, "ROOT")
	if err != nil {
		t.Fatal(err)
	}
	return start, size
}

// ExtractRoot copies the ROOT partition of img into a sparse file of its own (for e2fsck,
// debugfs, resize2fs, which take a whole device).
func ExtractRoot(t testing.TB, img string) string {
	t.Helper()
	return flatcardisk.ExtractPartition(t, img, "ROOT")
}

// Fsck runs e2fsck -fn and fails the test unless the filesystem is clean.
func Fsck(t testing.TB, fsFile, when string) {
	t.Helper()
	out, err := exec.Command("e2fsck", "-fn", fsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -fn %s: %v\n%s", when, err, out)
	}
}

type Inode struct {
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

// Stat reads an inode with debugfs (e2fsprogs' reading, not ours).
func Stat(t testing.TB, fsFile, p string) Inode {
	t.Helper()
	out := testutil.MustRun(t, "debugfs", "-R", "stat "+p, fsFile)
	m := reType.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("debugfs stat %s: %s", p, out)
	}
	var in Inode
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

// DumpSum extracts a file with debugfs and returns its sha256.
func DumpSum(t testing.TB, fsFile, p string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump")
	testutil.MustRun(t, "debugfs", "-R", "dump "+p+" "+out, fsFile)
	return testutil.SHA256File(t, out)
}
