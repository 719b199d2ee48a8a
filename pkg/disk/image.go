package disk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Storage is what an image is read from and written to.
type Storage interface {
	io.ReaderAt
	io.WriterAt
	Size() int64
	Close() error
}

// Image is an opened disk image.
type Image struct {
	Path     string
	Format   Format
	Writable bool
	Storage
}

// ErrReadOnly is returned by WriteAt on an image opened for reading only.
var ErrReadOnly = errors.New("image opened read-only")

// qcow2Opener is set by the qcow2 support (qcow2.go) to expose a qcow2 file as virtual-disk storage.
var qcow2Opener func(f *os.File) (Storage, error)

// Open opens an image. writable opens a raw image for in-place edits; qcow2 images are read-only
// (write a new image instead, see the convert package).
func Open(path string, writable bool) (*Image, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("image %s does not exist; check the path", path)
		case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS):
			if writable {
				return nil, fmt.Errorf("image %s is not writable (%v); fix its permissions, or leave it untouched and write a copy with --output-file", path, err)
			}
			return nil, fmt.Errorf("image %s is not readable: %v", path, err)
		}
		return nil, fmt.Errorf("cannot open image %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not a disk image", path)
	}
	format, err := DetectFormat(f)
	if err != nil {
		f.Close()
		if errors.Is(err, ErrNotDiskImage) {
			return nil, withPath(err, path)
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	img := &Image{Path: path, Format: format, Writable: writable}
	switch format {
	case FormatRaw:
		img.Storage = &rawStorage{f: f, size: st.Size(), writable: writable}
	case FormatQcow2:
		if writable {
			f.Close()
			return nil, fmt.Errorf("%s is a qcow2 image and cannot be edited in place; write the result to a new file with --output-file OUT.qcow2 (or OUT.raw)", path)
		}
		if qcow2Opener == nil {
			f.Close()
			return nil, fmt.Errorf("%s is a qcow2 image; convert it to raw first with 'flatcar-capo convert %s OUT.raw'", path, path)
		}
		s, err := qcow2Opener(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		img.Storage = s
	}
	return img, nil
}

type rawStorage struct {
	f        *os.File
	size     int64
	writable bool
}

func (r *rawStorage) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r *rawStorage) WriteAt(p []byte, off int64) (int, error) {
	if !r.writable {
		return 0, ErrReadOnly
	}
	return r.f.WriteAt(p, off)
}
func (r *rawStorage) Size() int64 { return r.size }
func (r *rawStorage) Close() error {
	if r.writable {
		if err := r.f.Sync(); err != nil {
			r.f.Close()
			return err
		}
	}
	return r.f.Close()
}

// File returns the underlying *os.File of a raw image (nil for other formats), for sparse copies.
func (img *Image) File() *os.File {
	if r, ok := img.Storage.(*rawStorage); ok {
		return r.f
	}
	return nil
}
