package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
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
	return raw.Extents(ctx, func(off, n int64) error {
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
	})
}

// chunk bounds each copy so cancellation is noticed quickly.
const chunk = 64 << 20

// OpenFile is the one open of an image file (disk.Open, format detection, upload's checks). What
// cannot be a disk image is refused before any read: a directory, a named pipe (opening one would
// wait for a writer forever), a device (a link to /dev/zero reads as an endless empty disk), a
// socket, an empty file. path is checked with stat first, then opened non-blocking in case it
// changed in between, and checked again on the open descriptor.
func OpenFile(path string, writable bool) (*os.File, fs.FileInfo, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return infile.OpenChecked(path, flag, func(st fs.FileInfo) error { return checkFileInfo(path, st) },
		func(err error) error { return openError(path, writable, err) })
}

// CheckFile is OpenFile's refusal without opening: for a path checked before any work starts
// (build --base-image).
func CheckFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return openError(path, false, err)
	}
	return checkFileInfo(path, st)
}

// checkFileInfo refuses what st says cannot be a disk image; the error wraps ErrNotDiskImage and,
// as a wrong argument rather than a failed run, errs.ErrInvalid (exit code 2, as upload always had).
func checkFileInfo(path string, st fs.FileInfo) error {
	m := st.Mode()
	what, fix := infile.Describe(m), "give the path of an image file"
	switch {
	case m.IsRegular() && st.Size() > 0:
		return nil
	case m.IsRegular():
		what, fix = "an empty file", "0 bytes hold no partition table (not even one of its 512-byte sectors); was a download or a copy cut short?"
	case m.IsDir():
		what += " (not a regular file)"
	case m&fs.ModeNamedPipe != 0:
		fix = "images are read at random offsets; save the stream to a file first"
	case m&fs.ModeCharDevice != 0:
		fix = "it has no size and reads without end (is it a link to /dev/zero?); give the path of an image file"
	case m&fs.ModeDevice != 0:
		fix = "copy it to an image file first (dd if=DEVICE of=disk.raw)"
	}
	return errs.Invalidf("%s is %s, %w: %s", path, what, ErrNotDiskImage, fix)
}

func openError(path string, writable bool, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("image %s does not exist; check the path", path)
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS):
		if writable {
			return fmt.Errorf("image %s is not writable (%v); fix its permissions, or leave it untouched and write a copy with --output-file", path, err)
		}
		return fmt.Errorf("image %s is not readable: %v", path, err)
	}
	return fmt.Errorf("cannot open image %s: %w", path, err)
}
