package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// CopySparse copies src to an empty dst: a reflink where the filesystem can (btrfs, xfs: instant,
// no data written), else reading only the data regions that SEEK_DATA/SEEK_HOLE report, so holes
// stay holes and a 9 GiB image with 1 GiB of data costs 1 GiB of I/O. Data runs go through
// copy_file_range where the kernel offers it.
func CopySparse(ctx context.Context, dst, src *os.File) error {
	if unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil {
		return nil
	}
	st, err := src.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if err := dst.Truncate(size); err != nil {
		return fmt.Errorf("cannot size %s: %w", dst.Name(), err)
	}
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := unix.Seek(int(src.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return copyRange(ctx, dst, src, off, size-off) // no SEEK_DATA support: plain copy
		}
		hole, err := unix.Seek(int(src.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		if err := copyRange(ctx, dst, src, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// chunk bounds each copy so cancellation is noticed quickly.
const chunk = 64 << 20

func copyRange(ctx context.Context, dst, src *os.File, off, n int64) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := min(n, chunk)
		if _, err := src.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := dst.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(dst, src, c); err != nil {
			return fmt.Errorf("copying %s to %s: %w", src.Name(), dst.Name(), err)
		}
		off += c
		n -= c
	}
	return nil
}
