package disk

import (
	"errors"
	"io"
)

// Section is a byte range of an image (a partition) with bounds-checked reads and writes.
type Section struct {
	base        Storage
	Offset, Len int64
}

// NewSection returns the range [off, off+n) of s.
func NewSection(s Storage, off, n int64) *Section { return &Section{base: s, Offset: off, Len: n} }

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
