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

// ZeroBlock is the granularity of WriteNonZero: all-zero blocks of this size are not written.
const ZeroBlock = 4096

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
		n := min(len(p)-i, ZeroBlock-int((off+int64(i))%ZeroBlock))
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
