package qcow2

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

func seedImages(t testing.TB) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob(testutil.Testdata("qcow2", "seed-*.qcow2"))
	if len(paths) == 0 {
		t.Fatal("no seed images in testdata/qcow2")
	}
	seeds := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds[filepath.Base(p)] = b
	}
	return seeds
}

// The committed qemu-img images (v2 and v3, plain, compressed and zero-flagged clusters of
// 512 B and 1 KiB) read back as the raw they were made from, without qemu-img installed.
func TestSeedImagesMatchRaw(t *testing.T) {
	want, err := os.ReadFile(testutil.Testdata("qcow2", "seed.raw"))
	if err != nil {
		t.Fatal(err)
	}
	zeroed := append([]byte(nil), want...)
	clear(zeroed[39936:40448]) // seed-v3-zero has zero-flagged clusters there (qemu-io write -z)
	for name, b := range seedImages(t) {
		want := want
		if name == "seed-v3-zero.qcow2" {
			want = zeroed
		}
		r, err := open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, r.Size())
		if n, err := r.ReadAt(got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes (%v), content equal: %v", name, n, err, bytes.Equal(got, want))
		}
	}
}

var errStop = errors.New("stop")

// FuzzOpen feeds mutated images to the header and table parsing and to reads: errors are fine,
// panics and huge allocations are not (tables are bounded by the input's length).
func FuzzOpen(f *testing.F) {
	for _, b := range seedImages(f) {
		f.Add(b)
	}
	f.Fuzz(fuzzOpenBody)
}

func fuzzOpenBody(t *testing.T, data []byte) {
	{
		r, err := open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		buf := make([]byte, 3*r.cs/2)
		for _, off := range []int64{0, r.Size() / 2, r.Size() - 1, r.cs - 1} {
			if off >= 0 {
				r.ReadAt(buf, off)
			}
		}
		n := 0
		r.Extents(context.Background(), func(off, k int64) error {
			if n++; n > 64 {
				return errStop
			}
			r.ReadAt(buf[:min(k, int64(len(buf)))], off)
			return nil
		})
	}
}
