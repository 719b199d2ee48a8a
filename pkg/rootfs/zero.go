package rootfs

import (
	"context"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// copyRangeSparse copies [off, off+n) of src to the start of dst (made n bytes long), only the
// data regions SEEK_DATA/SEEK_HOLE report, without their all-zero blocks.
func copyRangeSparse(ctx context.Context, dst, src *os.File, off, n int64) error {
	if err := dst.Truncate(n); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	return vdisk.DataRanges(ctx, src, off, off+n, func(data, size int64) error {
		for p, end := data, data+size; p < end; {
			c := min(int64(cap(buf)), end-p)
			if _, err := src.ReadAt(buf[:c], p); err != nil {
				return err
			}
			if err := vdisk.WriteNonZero(dst, buf[:c], p-off); err != nil {
				return err
			}
			p += c
		}
		return nil
	})
}
