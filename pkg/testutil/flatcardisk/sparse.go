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

// copyInto writes the data regions of the file src into dst at offset off, skipping holes and
// all-zero blocks, so dst (a fresh sparse file) stays sparse.
func copyInto(dst *os.File, off int64, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	raw, err := vdisk.NewFile(in, false)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	return raw.Extents(context.Background(), func(data, n int64) error {
		for p := data; p < data+n; {
			c := min(int64(len(buf)), data+n-p)
			if _, err := in.ReadAt(buf[:c], p); err != nil && err != io.EOF {
				return err
			}
			if err := vdisk.WriteNonZero(dst, buf[:c], off+p); err != nil {
				return err
			}
			p += c
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
