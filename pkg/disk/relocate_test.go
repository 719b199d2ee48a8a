package disk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

func sgdiskVerify(t *testing.T, path string) string {
	t.Helper()
	out, _ := exec.Command("sgdisk", "-v", path).CombinedOutput()
	return string(out)
}

// tableBytes returns the first and last 34 sectors (MBR, headers, partition arrays).
func tableBytes(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	head, tail := make([]byte, 34*512), make([]byte, 34*512)
	f.ReadAt(head, 0)
	f.ReadAt(tail, st.Size()-int64(len(tail)))
	return string(head) + string(tail)
}

// TestGrowMovesTheBackupGPT: an enlarged Flatcar disk has its backup GPT in the middle (sgdisk -v
// complains); after Grow the table is clean, the partitions are unchanged, the protective MBR
// covers the new size, and go-diskfs (which checks the backup position) agrees.
func TestGrowMovesTheBackupGPT(t *testing.T) {
	testutil.RequireTools(t, "sgdisk")
	for _, hybrid := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "disk.raw")
		copyFile(t, flatcardisk.Build(t, flatcardisk.Options{HybridMBR: hybrid}), path)
		before := flatcardisk.Partitions(t, path)
		const size = 1 << 30
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		if out := sgdiskVerify(t, path); strings.Contains(out, "No problems found") {
			t.Fatalf("sgdisk -v finds no problem on an enlarged image; the test proves nothing:\n%s", out)
		}
		if err := disk.Grow(path, size); err != nil {
			t.Fatal(err)
		}
		if out := sgdiskVerify(t, path); !strings.Contains(out, "No problems found") {
			t.Fatalf("hybrid=%t: sgdisk -v after Grow:\n%s", hybrid, out)
		}
		if after := flatcardisk.Partitions(t, path); !reflect.DeepEqual(before, after) {
			t.Fatalf("partitions changed:\nbefore %+v\nafter  %+v", before, after)
		}
		img, _ := disk.Open(path, false)
		theirs, recovered, err := diskfsPartitions(img.Disk)
		if err != nil || recovered || !reflect.DeepEqual(before, theirs) {
			t.Fatalf("go-diskfs after Grow: %v recovered=%t %+v", err, recovered, theirs)
		}
		mbr, _ := disk.ReadMBR(img.Disk)
		img.Close()
		if want := map[bool]disk.MBRKind{false: disk.MBRProtective, true: disk.MBRHybrid}[hybrid]; mbr.Kind != want {
			t.Fatalf("MBR is %s after Grow, want %s", mbr.Kind, want)
		}
		// Idempotent: a second call on a table that already ends at the end changes nothing.
		s1 := tableBytes(t, path)
		if err := disk.RelocateBackupGPT(path); err != nil || tableBytes(t, path) != s1 {
			t.Fatalf("second RelocateBackupGPT: err %v, table changed: %t", err, tableBytes(t, path) != s1)
		}
	}
}

// TestGrowRefusesShrinkingAndQcow2AndLeavesTheImage: bad requests name the problem and write nothing.
func TestGrowRefusesShrinkingAndQcow2AndLeavesTheImage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.raw")
	copyFile(t, flatcardisk.Build(t, flatcardisk.Options{}), path)
	st, _ := os.Stat(path)
	if err := disk.Grow(path, st.Size()-1<<20); err == nil || !strings.Contains(err.Error(), "shrinking") {
		t.Fatalf("shrink: %v", err)
	}
	if err := disk.Grow(path, st.Size()+1); err == nil || !strings.Contains(err.Error(), "multiple of 512") {
		t.Fatalf("odd size: %v", err)
	}
	q := filepath.Join(t.TempDir(), "disk.qcow2")
	testutil.QemuImg(t, "convert", "-O", "qcow2", path, q)
	if err := disk.Grow(q, 2<<30); err == nil || !strings.Contains(err.Error(), "qcow2") {
		t.Fatalf("qcow2: %v", err)
	}
	// A damaged primary header is refused and the file keeps its size.
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt(make([]byte, 512), 512)
	f.Close()
	if err := disk.Grow(path, st.Size()+64<<20); err == nil || !strings.Contains(err.Error(), "primary GPT is not valid") {
		t.Fatalf("damaged primary: %v", err)
	}
	if st2, _ := os.Stat(path); st2.Size() != st.Size() {
		t.Fatalf("a refused Grow left the image at %d bytes (was %d)", st2.Size(), st.Size())
	}
}
