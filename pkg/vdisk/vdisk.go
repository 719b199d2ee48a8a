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

var zeros [64 << 10]byte

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
