package rootfs

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/diskfs/go-diskfs/filesystem/ext4"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// TestReaderAtRandomReads: random reads of a 120 MiB file (several extents) baked into ROOT
// return its bytes, including reads that start just past an extent's end, where go-diskfs'
// File.Read panics (asserted, so the workaround is dropped when go-diskfs is fixed).
func TestReaderAtRandomReads(t *testing.T) {
	src := image(t, 0, "")
	big := randomFile(t, 120<<20+12345)
	e, err := hostFile("opt/big.raw", 0o644, big)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out.img")
	if _, err := bake(context.Background(), src, dst, []Entry{e}); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	img, err := disk.Open(dst, false)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	p, err := img.FindPartition("ROOT")
	if err != nil {
		t.Fatal(err)
	}
	root, err := disk.OpenExt4(img.Section(p), "ROOT")
	if err != nil {
		t.Fatal(err)
	}
	ra, size, err := root.ReaderAt("opt/big.raw")
	if err != nil || size != int64(len(want)) {
		t.Fatalf("ReaderAt: size %d, %v", size, err)
	}
	// go-diskfs itself, without the workaround:
	fsys, err := ext4.Read(disk.Backend(img.Section(p), true), p.Size, 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	panics := 0
	for i := range 400 {
		off := r.Int64N(int64(len(want)))
		n := 1 + r.IntN(200000)
		buf := make([]byte, n)
		got, err := ra.ReadAt(buf, off)
		end := min(off+int64(n), int64(len(want)))
		if int64(got) != end-off || (err != nil && err != io.EOF) || !bytes.Equal(buf[:got], want[off:end]) {
			t.Fatalf("read %d: %d bytes at %d: got %d, %v", i, n, off, got, err)
		}
		panics += directReadPanics(fsys, off, n)
	}
	if panics == 0 {
		t.Log("go-diskfs' File.Read no longer panicked on these offsets; the aligned reader may be unnecessary")
	} else {
		t.Logf("go-diskfs' own File.Read panicked on %d of 400 random reads", panics)
	}
}

func directReadPanics(fsys *ext4.FileSystem, off int64, n int) (panicked int) {
	defer func() {
		if recover() != nil {
			panicked = 1
		}
	}()
	f, err := fsys.OpenFile("opt/big.raw", os.O_RDONLY)
	if err != nil {
		return 0
	}
	f.(io.Seeker).Seek(off, io.SeekStart)
	io.ReadFull(f, make([]byte, n))
	return 0
}
