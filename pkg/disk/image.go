package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Image is an opened disk image: its virtual disk (a raw file or a qcow2 image's) and its GPT,
// read once.
type Image struct {
	Path     string
	Format   Format
	Writable bool
	vdisk.Disk
	f     *os.File
	raw   *vdisk.File // nil for qcow2
	parts []Partition
	perr  error
}

// ErrReadOnly is returned by WriteAt on an image opened for reading only.
var ErrReadOnly = vdisk.ErrReadOnly

// Open opens an image. writable opens a raw image for in-place edits; qcow2 images are read-only
// (write a new image instead, see the convert package).
func Open(path string, writable bool) (*Image, error) {
	f, _, err := OpenFile(path, writable)
	if err != nil {
		return nil, err
	}
	format, err := DetectFormat(f)
	if err != nil {
		f.Close()
		if errors.Is(err, ErrNotDiskImage) {
			return nil, withPath(err, path)
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	img := &Image{Path: path, Format: format, Writable: writable, f: f}
	switch format {
	case FormatRaw:
		if img.raw, err = vdisk.NewFile(f, writable); err != nil {
			f.Close()
			return nil, err
		}
		img.Disk = img.raw
	case FormatQcow2:
		if writable {
			f.Close()
			return nil, fmt.Errorf("%s is a qcow2 image and cannot be edited in place; write the result to a new file with --output-file OUT.qcow2 (or OUT.raw)", path)
		}
		r, err := qcow2.OpenFile(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		img.Disk = r
	}
	return img, nil
}

// Close closes the image (syncing a writable one first).
func (img *Image) Close() error {
	if img.raw != nil {
		return img.raw.Close()
	}
	if img.f == nil { // FromDisk: the caller's
		return nil
	}
	return img.f.Close()
}

// File returns the underlying *os.File of a raw image (nil for other formats), for sparse copies.
func (img *Image) File() *os.File {
	if img.raw != nil {
		return img.f
	}
	return nil
}

// FromDisk is an Image over a virtual disk the caller owns and closes (a build's copy-on-write
// overlay, say); its format is raw, since that is what its bytes are. Not writable, it refuses
// writes (vdisk.Protect), as an Image opened for reading does.
func FromDisk(path string, d vdisk.Disk, writable bool) *Image {
	if !writable {
		d = vdisk.Protect(d)
	}
	return &Image{Path: path, Format: FormatRaw, Writable: writable, Disk: d}
}

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
