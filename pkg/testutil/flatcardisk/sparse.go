package flatcardisk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
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
	st, err := in.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for pos := int64(0); pos < st.Size(); {
		data, err := unix.Seek(int(in.Fd()), pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("seeking data in %s: %w", src, err)
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seeking a hole in %s: %w", src, err)
		}
		for p := data; p < hole; {
			n := int64(len(buf))
			if hole-p < n {
				n = hole - p
			}
			if _, err := in.ReadAt(buf[:n], p); err != nil && err != io.EOF {
				return err
			}
			if !bytes.Equal(buf[:n], zero[:n]) {
				if _, err := dst.WriteAt(buf[:n], off+p); err != nil {
					return err
				}
			}
			p += n
		}
		pos = hole
	}
	return nil
}

// copySparse copies src to a new file dst: a reflink where the filesystem can, else a sparse copy.
func copySparse(src, dst string) error {
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
