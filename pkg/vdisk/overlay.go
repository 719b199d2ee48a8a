package vdisk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
)

// overlayBlock is the granularity of an Overlay's own ranges: a write that covers part of a
// block first copies the rest of it up from the base.
const overlayBlock = 4096

// Overlay is a copy-on-write disk over a read-only base: written ranges live in a sparse
// temporary file (0600, unlinked as soon as it is made, so no failure or signal leaves it
// behind), everything else reads through to the base. A build edits the verified base this way
// without writing a raw copy of all of it first (the qcow2 step then reads each byte once).
// Reads are safe for concurrent use with each other; writes are not concurrent with reads.
type Overlay struct {
	base Disk
	f    *os.File
	size int64
	mu   sync.RWMutex
	own  Ranges // block-aligned ranges whose content is the file's
}

type rng struct{ start, end int64 }

// Ranges is a set of byte ranges [start, end): sorted, disjoint, merged.
type Ranges []rng

// Overlaps reports whether [start, end) touches a range of the set.
func (rs Ranges) Overlaps(start, end int64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end > start })
	return i < len(rs) && rs[i].start < end
}

// Add puts [start, end) in the set, merging it with its neighbours.
func (rs *Ranges) Add(start, end int64) {
	if start >= end {
		return
	}
	r := *rs
	i := sort.Search(len(r), func(i int) bool { return r[i].end >= start })
	j := i
	for j < len(r) && r[j].start <= end {
		start, end = min(start, r[j].start), max(end, r[j].end)
		j++
	}
	*rs = slices.Replace(r, i, j, rng{start, end})
}

// NewOverlay makes an overlay over base whose file lives in dir.
func NewOverlay(base Disk, dir string) (*Overlay, error) {
	f, err := os.CreateTemp(dir, ".overlay-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // the open descriptor keeps it until Close
	if err := f.Truncate(base.Size()); err != nil {
		f.Close()
		return nil, fmt.Errorf("sizing the overlay file: %w", err)
	}
	return &Overlay{base: base, f: f, size: base.Size()}, nil
}

// Base is the disk the overlay reads through to.
func (o *Overlay) Base() Disk { return o.base }

// Touched reports whether anything in [off, off+n) was written or discarded.
func (o *Overlay) Touched(off, n int64) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.own.Overlaps(off, off+n)
}

// Close releases the overlay's file (the base is the caller's).
func (o *Overlay) Close() error { return o.f.Close() }

func (o *Overlay) Size() int64 { return o.size }

// ReadAt reads the file where the overlay owns the range and the base elsewhere, each stretch
// in one call (a base's compressed clusters decode best in long runs).
func (o *Overlay) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("overlay: negative offset")
	}
	if off >= o.size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > o.size-off {
		p, eof = p[:o.size-off], io.EOF
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	end := off + int64(len(p))
	i := sort.Search(len(o.own), func(i int) bool { return o.own[i].end > off })
	for pos := off; pos < end; {
		var next int64
		var r io.ReaderAt
		if i < len(o.own) && o.own[i].start <= pos {
			next, r = min(end, o.own[i].end), o.f
			i++
		} else {
			next, r = end, o.base
			if i < len(o.own) {
				next = min(end, o.own[i].start)
			}
		}
		// A short read at the end of r (a base whose size is not a whole number of its own
		// blocks) reads as zeros.
		buf := p[pos-off : next-off]
		if n, err := r.ReadAt(buf, pos); n < len(buf) && err != io.EOF {
			return int(pos - off), cmp.Or(err, io.ErrUnexpectedEOF)
		} else if n < len(buf) {
			clear(buf[n:])
		}
		pos = next
	}
	return len(p), eof
}

// WriteAt writes p into the overlay's file; the rest of a partly written block is copied up
// from what the disk held.
func (o *Overlay) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if off < 0 || end > o.size {
		return 0, fmt.Errorf("overlay: write of %d bytes at %d is outside the %d-byte disk", len(p), off, o.size)
	}
	if len(p) == 0 {
		return 0, nil
	}
	lo := off &^ (overlayBlock - 1)
	hi := min(o.size, (end+overlayBlock-1)&^(overlayBlock-1))
	buf := p
	if lo != off || hi != end {
		buf = make([]byte, hi-lo)
		if err := o.fill(buf[:min(len(buf), overlayBlock)], lo); err != nil {
			return 0, err
		}
		if tail := (hi - 1) &^ (overlayBlock - 1); tail > lo {
			if err := o.fill(buf[tail-lo:], tail); err != nil {
				return 0, err
			}
		}
		copy(buf[off-lo:], p)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.f.WriteAt(buf, lo); err != nil {
		return 0, fmt.Errorf("overlay: %w", err)
	}
	o.own.Add(lo, hi)
	return len(p), nil
}

// fill reads the current content of [off, off+len(p)), clipped to the disk.
func (o *Overlay) fill(p []byte, off int64) error {
	p = p[:min(int64(len(p)), o.size-off)]
	if _, err := o.ReadAt(p, off); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// Discard makes [off, off+n) read as zeros, punching a hole in the overlay's file where it can
// (nothing of the base shows there any more, and nothing is stored).
func (o *Overlay) Discard(off, n int64) error {
	if off < 0 || n < 0 || off+n > o.size {
		return fmt.Errorf("overlay: discard of %d bytes at %d is outside the %d-byte disk", n, off, o.size)
	}
	lo := (off + overlayBlock - 1) &^ (overlayBlock - 1)
	hi := (off + n) &^ (overlayBlock - 1)
	if off+n == o.size {
		hi = o.size
	}
	if lo >= hi { // within one block
		_, err := o.WriteAt(make([]byte, n), off)
		return err
	}
	// The partial blocks at either end are written as zeros (WriteAt of nothing does nothing).
	for _, r := range []rng{{off, lo}, {hi, off + n}} {
		if _, err := o.WriteAt(make([]byte, r.end-r.start), r.start); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := ZeroRange(o.f, lo, hi-lo); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	o.own.Add(lo, hi)
	return nil
}

// Extents are the base's extents outside the overlay's ranges, and within them the file's data
// ranges (a written block counts, zeros included, as it would in a raw copy; a discarded one
// does not), merged, in order.
func (o *Overlay) Extents(ctx context.Context, fn func(off, n int64) error) error {
	o.mu.RLock()
	own := append([]rng(nil), o.own...)
	o.mu.RUnlock()
	var file []rng
	for _, s := range own {
		if err := DataRanges(ctx, o.f, s.start, s.end, func(off, n int64) error {
			file = append(file, rng{off, off + n})
			return nil
		}); err != nil {
			return err
		}
	}
	// Merge the two ordered streams: base pieces clipped to the gaps between own ranges, and
	// the file's pieces; adjacent pieces are reported as one.
	cur := rng{-1, -1}
	emit := func(s rng) error {
		if s.start >= s.end {
			return nil
		}
		if s.start == cur.end {
			cur.end = s.end
			return nil
		}
		if cur.start >= 0 {
			if err := fn(cur.start, cur.end-cur.start); err != nil {
				return err
			}
		}
		cur = s
		return nil
	}
	fi := 0
	flushFile := func(upTo int64) error { // file pieces that start before upTo
		for fi < len(file) && file[fi].start < upTo {
			if err := emit(file[fi]); err != nil {
				return err
			}
			fi++
		}
		return nil
	}
	oi := 0
	err := o.base.Extents(ctx, func(off, n int64) error {
		for end := off + n; off < end; {
			for oi < len(own) && own[oi].end <= off {
				oi++
			}
			stop := end
			if oi < len(own) {
				if own[oi].start <= off { // inside an own range: skip it
					off = min(end, own[oi].end)
					continue
				}
				stop = min(end, own[oi].start)
			}
			if err := flushFile(off); err != nil {
				return err
			}
			if err := emit(rng{off, stop}); err != nil {
				return err
			}
			off = stop
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := flushFile(o.size + 1); err != nil {
		return err
	}
	if cur.start >= 0 {
		return fn(cur.start, cur.end-cur.start)
	}
	return nil
}
