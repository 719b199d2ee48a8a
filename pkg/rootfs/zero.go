package rootfs

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// zeroRange makes [off, off+n) of f read as zeros: a punched hole where the filesystem can (the
// copy stays sparse and old ROOT data does not linger under the new filesystem), else zeros.
func zeroRange(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	zero := make([]byte, 1<<20)
	for n > 0 {
		c := min(n, int64(len(zero)))
		if _, err := f.WriteAt(zero[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

// copyRangeSparse copies [off, off+n) of src to the start of dst (made n bytes long), only the
// data regions SEEK_DATA/SEEK_HOLE report.
func copyRangeSparse(ctx context.Context, dst, src *os.File, off, n int64) error {
	if err := dst.Truncate(n); err != nil {
		return err
	}
	end := off + n
	buf := make([]byte, 1<<20)
	for pos := off; pos < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := unix.Seek(int(src.Fd()), pos, unix.SEEK_DATA)
		if err == unix.ENXIO || (err == nil && data >= end) {
			return nil // only holes up to the end
		}
		if err != nil {
			data = pos // no SEEK_DATA here: copy everything
		}
		hole, err := unix.Seek(int(src.Fd()), data, unix.SEEK_HOLE)
		if err != nil || hole > end {
			hole = end
		}
		for p := data; p < hole; {
			c := min(int64(len(buf)), hole-p)
			if _, err := src.ReadAt(buf[:c], p); err != nil {
				return err
			}
			if _, err := dst.WriteAt(buf[:c], p-off); err != nil {
				return err
			}
			p += c
		}
		pos = hole
	}
	return nil
}
