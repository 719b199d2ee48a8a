package vdisk

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A raw file written without holes (as packer copies its disk) gets a hole for each all-zero
// 64 KiB block and keeps every byte it had; partial blocks and data blocks stay allocated.
func TestPunchZeros(t *testing.T) {
	const block = 64 << 10
	content := make([]byte, 40*block+1000) // ends in a partial block of zeros
	rnd := rand.New(rand.NewSource(1))
	for _, b := range []int{0, 3, 4, 17, 39} {
		rnd.Read(content[b*block : (b+1)*block])
	}
	content[10*block+5] = 1 // one byte keeps block 10
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, content, 0o600); err != nil { // every block allocated
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := allocated(t, f)
	punched, err := PunchZeros(context.Background(), f, block)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(40-6) * block; punched != want {
		t.Errorf("punched %d bytes, want %d (34 zero blocks; the partial block at the end is kept)", punched, want)
	}
	if after := allocated(t, f); before-after < punched-block {
		t.Errorf("allocated %d -> %d bytes: the holes were not made", before, after)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, content) {
		t.Fatal("the content changed")
	}
	var data int64
	DataRanges(context.Background(), f, 0, int64(len(content)), func(_, n int64) error { data += n; return nil })
	if data > 7*block {
		t.Errorf("%d bytes of data ranges after punching, want at most 7 blocks", data)
	}
	// A second pass finds nothing left to punch.
	if again, err := PunchZeros(context.Background(), f, block); err != nil || again != 0 {
		t.Errorf("second pass punched %d (%v), want 0", again, err)
	}
}

func allocated(t *testing.T, f *os.File) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
