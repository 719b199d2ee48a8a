package vdisk

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// The overlay against a model: random writes (unaligned, across blocks, zeros among them) and
// discards on an overlay over a sparse base give the same bytes as the same edits on a copy of
// the base; its extents cover every non-zero byte, leave out discarded and never-written holes,
// include written zeros, and the base and the directory are left as they were.
func TestOverlayMatchesACopy(t *testing.T) {
	const size = 3<<20 + 1000 // not a whole number of blocks
	dir := t.TempDir()
	rnd := rand.New(rand.NewSource(1))
	model := make([]byte, size)
	for _, r := range []struct{ off, n int64 }{{0, 8192}, {1 << 20, 300 << 10}, {size - 5000, 5000}} {
		rnd.Read(model[r.off : r.off+r.n])
	}
	basePath := filepath.Join(dir, "base.raw")
	bf, err := os.Create(basePath)
	if err != nil {
		t.Fatal(err)
	}
	bf.Truncate(size)
	if err := WriteNonZero(bf, model, 0); err != nil {
		t.Fatal(err)
	}
	baseCopy := append([]byte(nil), model...)
	base, err := NewFile(bf, false)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOverlay(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, ".overlay-*")); len(left) != 0 {
		t.Errorf("the overlay's file is visible in the directory: %v", left)
	}
	written := make([]bool, size) // bytes whose block the overlay stores (a raw copy would have them)
	mark := func(off, n int64, v bool) {
		lo, hi := off&^(overlayBlock-1), min(size, (off+n+overlayBlock-1)&^(overlayBlock-1))
		for i := lo; i < hi; i++ {
			written[i] = v
		}
	}
	for i := range 300 {
		off := rnd.Int63n(size)
		n := min(size-off, 1+rnd.Int63n(20000))
		switch i % 5 {
		case 0: // a discard: reads as zeros, stores nothing
			if err := o.Discard(off, n); err != nil {
				t.Fatal(err)
			}
			clear(model[off : off+n])
			lo, hi := (off+overlayBlock-1)&^(overlayBlock-1), (off+n)&^(overlayBlock-1)
			if off+n == size {
				hi = size
			}
			if lo < hi {
				mark(off, lo-off, true)
				mark(hi, off+n-hi, true)
				for k := lo; k < hi; k++ {
					written[k] = false
				}
			} else {
				mark(off, n, true)
			}
			continue
		case 1: // zeros written are data
			clear(model[off : off+n])
		default:
			rnd.Read(model[off : off+n])
		}
		if _, err := o.WriteAt(model[off:off+n], off); err != nil {
			t.Fatal(err)
		}
		mark(off, n, true)
	}
	got := make([]byte, size)
	if n, err := o.ReadAt(got, 0); n != size || (err != nil && err.Error() != "EOF") {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	if !bytes.Equal(got, model) {
		t.Fatal("the overlay reads differently from the edited copy")
	}
	for i := 0; i < 200; i++ { // small reads at odd places
		off := rnd.Int63n(size)
		p := make([]byte, min(size-off, rnd.Int63n(70000)))
		o.ReadAt(p, off)
		if !bytes.Equal(p, model[off:off+int64(len(p))]) {
			t.Fatalf("read of %d at %d differs", len(p), off)
		}
	}
	covered := make([]bool, size)
	prev := int64(-1)
	if err := o.Extents(context.Background(), func(off, n int64) error {
		if off <= prev {
			t.Errorf("extent at %d not after the previous end %d (unmerged or out of order)", off, prev)
		}
		prev = off + n
		for i := off; i < off+n; i++ {
			covered[i] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range model {
		switch {
		case model[i] != 0 && !covered[i]:
			t.Fatalf("byte %d holds data outside the extents", i)
		case written[i] && !covered[i]:
			t.Fatalf("written byte %d outside the extents", i)
		case !written[i] && covered[i] && baseCopy[i&^(overlayBlock-1)] == 0 && allZero(baseCopy[i&^(overlayBlock-1):min(size, i&^(overlayBlock-1)+overlayBlock)]):
			t.Fatalf("byte %d in the extents: neither written nor data in the base", i)
		}
	}
	b, _ := os.ReadFile(basePath)
	if !bytes.Equal(b, baseCopy) {
		t.Fatal("the base was modified")
	}
	if _, err := o.WriteAt([]byte{1}, size); err == nil {
		t.Error("a write past the end succeeded")
	}
	// Touched tells the bake whether the base still holds a range as it was.
	fresh, err := NewOverlay(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fresh.WriteAt([]byte{1}, 2*overlayBlock+5)
	for _, c := range []struct {
		off, n int64
		want   bool
	}{{0, 2 * overlayBlock, false}, {0, 2*overlayBlock + 1, true}, {3 * overlayBlock, size - 3*overlayBlock, false}, {2*overlayBlock + 4000, 1, true}} {
		if got := fresh.Touched(c.off, c.n); got != c.want {
			t.Errorf("Touched(%d, %d) = %v after one byte at %d", c.off, c.n, got, 2*overlayBlock+5)
		}
	}
}

func allZero(b []byte) bool { return IsZero(b) }
