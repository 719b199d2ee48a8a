// Package vdisk is the one virtual-disk interface: a raw image file, a qcow2 image's virtual disk
// and a partition of either are all read, written, sized and walked for data through Disk. The
// sparse walk (SEEK_DATA/SEEK_HOLE) and the all-zero test every copy uses live here too.
package vdisk

import (
	"bytes"
	"context"
	"errors"
	"io"
)

// Disk is a virtual disk.
type Disk interface {
	io.ReaderAt
	// WriteAt fails with ErrReadOnly on a disk opened for reading only (a qcow2 image, always).
	io.WriterAt
	Size() int64
	// Extents calls fn for each range that may hold data, in increasing order; the rest reads as
	// zeros. It reads metadata only.
	Extents(ctx context.Context, fn func(off, n int64) error) error
}

// ErrReadOnly is returned by WriteAt on a disk opened for reading only.
var ErrReadOnly = errors.New("image opened read-only")

// ReadFailure is err unless it only says the disk ended (too small for what was read): a qcow2
// that cannot map a cluster, or an I/O error, must be reported as such, not as a missing or
// short structure.
func ReadFailure(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

var zeros [64 << 10]byte

// Zeros reads as an endless run of zero bytes.
type Zeros struct{}

func (Zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// IsZero reports whether b holds only zero bytes.
func IsZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// ReadOnly is a Disk over r of size bytes that refuses writes and reports one data extent (an
// image that is a file inside another filesystem, for example).
func ReadOnly(r io.ReaderAt, size int64) Disk { return readOnly{r, size} }

type readOnly struct {
	r    io.ReaderAt
	size int64
}

func (d readOnly) ReadAt(p []byte, off int64) (int, error) { return d.r.ReadAt(p, off) }
func (d readOnly) WriteAt([]byte, int64) (int, error)      { return 0, ErrReadOnly }
func (d readOnly) Size() int64                             { return d.size }
func (d readOnly) Extents(_ context.Context, fn func(off, n int64) error) error {
	if d.size == 0 {
		return nil
	}
	return fn(0, d.size)
}

// Protect makes d read-only (go-diskfs' FAT driver, for one, updates access times on reads).
func Protect(d Disk) Disk { return protected{d} }

type protected struct{ Disk }

func (protected) WriteAt([]byte, int64) (int, error) { return 0, ErrReadOnly }

// zeroBlock is the granularity of WriteNonZero: all-zero blocks of this size are not written.
const zeroBlock = 4096

// WriteNonZero is the one zero-skipper of the copies: it writes p at off to dst, except the
// all-zero ZeroBlock-aligned blocks, which stay as dst has them (a hole in a fresh sparse file).
func WriteNonZero(dst io.WriterAt, p []byte, off int64) error {
	start := -1 // start of the pending non-zero run in p
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		_, err := dst.WriteAt(p[start:end], off+int64(start))
		start = -1
		return err
	}
	for i := 0; i < len(p); {
		n := min(len(p)-i, zeroBlock-int((off+int64(i))%zeroBlock))
		if IsZero(p[i : i+n]) {
			if err := flush(i); err != nil {
				return err
			}
		} else if start < 0 {
			start = i
		}
		i += n
	}
	return flush(len(p))
}

// Section is a byte range of a disk (a partition) with bounds-checked reads and writes.
type Section struct {
	base        Disk
	Offset, Len int64
}

// NewSection returns the range [off, off+n) of d.
func NewSection(d Disk, off, n int64) *Section { return &Section{base: d, Offset: off, Len: n} }

var errOutOfRange = errors.New("access outside the partition")

func (s *Section) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= s.Len {
		return 0, io.EOF
	}
	if max := s.Len - off; int64(len(p)) > max {
		n, err := s.base.ReadAt(p[:max], s.Offset+off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.base.ReadAt(p, s.Offset+off)
}

func (s *Section) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > s.Len {
		return 0, errOutOfRange
	}
	return s.base.WriteAt(p, s.Offset+off)
}

func (s *Section) Size() int64 { return s.Len }

// Extents is the base's extents clipped to the section, relative to its start (a raw file is
// walked within the section only).
func (s *Section) Extents(ctx context.Context, fn func(off, n int64) error) error {
	end := s.Offset + s.Len
	clip := func(off, n int64) error {
		if off >= end {
			return errPastEnd
		}
		lo, hi := max(off, s.Offset), min(off+n, end)
		if lo < hi {
			return fn(lo-s.Offset, hi-lo)
		}
		return nil
	}
	if f, ok := s.base.(*File); ok {
		return DataRanges(ctx, f.f, s.Offset, min(end, f.size), clip)
	}
	if err := s.base.Extents(ctx, clip); err != errPastEnd {
		return err
	}
	return nil
}

// errPastEnd stops a base's walk once it is past the section.
var errPastEnd = errors.New("past the end of the section")
