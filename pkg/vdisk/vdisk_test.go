package vdisk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

type span struct{ off, n int64 }

func extents(t *testing.T, d Disk) []span {
	t.Helper()
	var got []span
	if err := d.Extents(context.Background(), func(off, n int64) error { got = append(got, span{off, n}); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// A sparse file's data ranges, whole and through sections (a raw file and another disk as base),
// clipped and relative to the section.
func TestExtentsAndSections(t *testing.T) {
	const mib = 1 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(8 * mib)
	f.WriteAt(bytes.Repeat([]byte{1}, mib), 1*mib)
	f.WriteAt(bytes.Repeat([]byte{2}, mib), 4*mib)
	raw, err := NewFile(f, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := extents(t, raw); len(got) != 2 || got[0] != (span{1 * mib, mib}) || got[1] != (span{4 * mib, mib}) {
		t.Fatalf("extents %v, want the two data MiB", got) // tmpfs, ext4, btrfs and xfs report them
	}
	want := []span{{0, mib / 2}, {mib * 5 / 2, mib / 2}}
	for _, base := range []Disk{raw, ReadOnly(f, 8*mib)} {
		sec := NewSection(base, 3*mib/2, 3*mib)
		got := extents(t, sec)
		if _, isFile := base.(*File); !isFile {
			want = []span{{0, 3 * mib}} // ReadOnly reports one extent
		}
		if len(got) != len(want) || got[0] != want[0] || (len(got) > 1 && got[1] != want[1]) {
			t.Errorf("section of %T: extents %v, want %v", base, got, want)
		}
	}
	if _, err := raw.WriteAt([]byte{1}, 0); err != ErrReadOnly {
		t.Errorf("WriteAt on a read-only file: %v", err)
	}
}

// WriteNonZero writes the content and leaves all-zero blocks as holes.
func TestWriteNonZero(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 64*zeroBlock)
	p[100] = 1
	p[40*zeroBlock+5] = 2
	if err := WriteNonZero(f, p, 3*zeroBlock); err != nil {
		t.Fatal(err)
	}
	f.Truncate(int64(len(p)) + 3*zeroBlock)
	got := make([]byte, len(p))
	f.ReadAt(got, 3*zeroBlock)
	if !bytes.Equal(got, p) {
		t.Fatal("content differs")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 8*zeroBlock {
		t.Errorf("%d bytes allocated for 2 non-zero blocks", st.Blocks*512)
	}
}
