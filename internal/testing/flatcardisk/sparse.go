package flatcardisk

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// sparseFile creates (or truncates) path as a sparse file of size bytes.
func sparseFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copyInto writes the data of the file src's range [off, off+n) into dst at dstOff, skipping
// holes and all-zero blocks, so dst (a fresh sparse file) stays sparse.
func copyInto(dst io.WriterAt, dstOff int64, src string, off, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	buf := make([]byte, 1<<20)
	return vdisk.DataRanges(context.Background(), in, off, off+n, func(data, n int64) error {
		for p := data; p < data+n; {
			c, err := in.ReadAt(buf[:min(int64(len(buf)), data+n-p)], p)
			if err != nil && err != io.EOF {
				return err
			}
			if c == 0 {
				return nil // past the end of src
			}
			if err := vdisk.WriteNonZero(dst, buf[:c], dstOff+p-off); err != nil {
				return err
			}
			p += int64(c)
		}
		return nil
	})
}

// CopySparse copies src to a new file dst (0600): a reflink where the filesystem can, else a sparse copy.
func CopySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := disk.CopySparse(context.Background(), out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
