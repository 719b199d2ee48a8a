package rootfs

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

type memDev []byte

func (m memDev) ReadAt(p []byte, off int64) (int, error)  { return copy(p, m[off:]), nil }
func (m memDev) WriteAt(p []byte, off int64) (int, error) { return copy(m[off:], p), nil }
func (m memDev) Size() int64                              { return int64(len(m)) }
func (m memDev) Extents(_ context.Context, fn func(off, n int64) error) error {
	return fn(0, m.Size())
}

// TestZeroSkipSameContent: random writes (many all-zero, many overlapping) through zeroSkip give
// exactly the bytes that direct writes give, and zero writes to untouched ranges are skipped.
func TestZeroSkipSameContent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		direct, skipped := make(memDev, 4096), make(memDev, 4096)
		z := &zeroSkip{Disk: skipped, on: true}
		for range 50 {
			off := r.IntN(4000)
			p := make([]byte, 1+r.IntN(4096-off))
			if r.IntN(2) == 0 {
				for i := range p {
					p[i] = byte(r.IntN(256))
				}
			}
			direct.WriteAt(p, int64(off))
			z.WriteAt(p, int64(off))
		}
		if !bytes.Equal(direct, skipped) {
			t.Fatalf("round %d: content differs", round)
		}
	}
	z := &zeroSkip{Disk: make(memDev, 100), on: true}
	z.WriteAt([]byte{1, 2}, 10)
	z.WriteAt(make([]byte, 10), 50)
	z.WriteAt(make([]byte, 10), 5)
	if z.skipped != 10 {
		t.Errorf("skipped %d bytes, want the 10 untouched ones", z.skipped)
	}
}
