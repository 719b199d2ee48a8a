package qcow2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Source is a virtual disk to copy from: a raw file (see RawSource) or a qcow2 Reader.
type Source interface {
	io.ReaderAt
	Size() int64
	// Extents calls fn for each range that may hold data, in increasing order; the rest reads as
	// zeros. It reads metadata only.
	Extents(ctx context.Context, fn func(off, n int64) error) error
}

// RawSource is a raw image file whose holes are found with SEEK_DATA/SEEK_HOLE.
type RawSource struct {
	f    *os.File
	size int64
}

// NewRawSource wraps an open raw image file.
func NewRawSource(f *os.File) (*RawSource, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &RawSource{f: f, size: st.Size()}, nil
}

func (s *RawSource) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }
func (s *RawSource) Size() int64                             { return s.size }

// Extents walks the file's data ranges; a file system without SEEK_DATA yields one range.
func (s *RawSource) Extents(ctx context.Context, fn func(off, n int64) error) error {
	fd := int(s.f.Fd())
	for pos := int64(0); pos < s.size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		start, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			if pos == 0 {
				return fn(0, s.size)
			}
			return fmt.Errorf("SEEK_DATA on %s stopped working: %w", s.f.Name(), err)
		}
		if err != nil {
			return fmt.Errorf("finding data in %s: %w", s.f.Name(), err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("finding holes in %s: %w", s.f.Name(), err)
		}
		end = min(end, s.size)
		if end > start {
			if err := fn(start, end-start); err != nil {
				return err
			}
		}
		pos = end
	}
	return nil
}

var zeros [64 << 10]byte

// isZero reports whether b holds only zero bytes.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if !bytes.Equal(b[:n], zeros[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// Progress is told how many bytes of the virtual disk were processed; nil is allowed.
type Progress func(n int64)

func (p Progress) add(n int64) {
	if p != nil && n > 0 {
		p(n)
	}
}
