package disk

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// CopySparse copies src to an empty dst: a reflink where the filesystem can (btrfs, xfs: instant,
// no data written), else reading only the data regions that SEEK_DATA/SEEK_HOLE report, so holes
// stay holes and a 9 GiB image with 1 GiB of data costs 1 GiB of I/O. Data runs go through
// copy_file_range where the kernel offers it.
func CopySparse(ctx context.Context, dst, src *os.File) error {
	if unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil {
		return nil
	}
	raw, err := vdisk.NewFile(src, false)
	if err != nil {
		return err
	}
	if err := dst.Truncate(raw.Size()); err != nil {
		return fmt.Errorf("cannot size %s: %w", dst.Name(), err)
	}
	return raw.Extents(ctx, func(off, n int64) error { return copyRange(ctx, dst, src, off, n) })
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
