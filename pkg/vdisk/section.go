package vdisk

import (
	"context"
	"errors"
	"io"
)

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
