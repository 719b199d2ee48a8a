package glance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// DetectFileFormat checks that path is an image Glance can take as qcow2 or raw and returns its
// format (from the header, never the extension) and size.
func DetectFileFormat(path string) (disk.Format, int64, error) {
	f, st, err := disk.OpenFile(path, false)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	format, err := disk.DetectFormat(f)
	var unsupported *disk.UnsupportedFormatError
	if errors.As(err, &unsupported) {
		unsupported.Path = path
		return "", 0, err
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", path, err)
	}
	var hdr [512]byte
	n, _ := f.ReadAt(hdr[:], 0)
	if format == disk.FormatQcow2 {
		if n < 72 {
			return "", 0, fmt.Errorf("%s: %w: truncated qcow2 header", path, disk.ErrNotDiskImage)
		}
		// Glance refuses a qcow2 with a backing file (it could read the host's files).
		if binary.BigEndian.Uint64(hdr[8:16]) != 0 {
			return "", 0, fmt.Errorf("%s: %w: the qcow2 has a backing file; flatten it with qemu-img convert -O qcow2", path, disk.ErrNotDiskImage)
		}
		return format, st.Size(), nil
	}
	if st.Size() == 0 || st.Size()%512 != 0 {
		return "", 0, fmt.Errorf("%s: %w: its size (%d bytes) is not a whole number of 512-byte sectors", path, disk.ErrNotDiskImage, st.Size())
	}
	return format, st.Size(), nil
}

// RawAsQcow2 streams a raw image as qcow2 on the fly (convert.Qcow2Reader): Glance gets a smaller
// qcow2 with the holes of the raw file left out. It returns the opener and the qcow2's length.
func RawAsQcow2(path string) (Opener, int64, error) {
	_, size, f, err := convert.Qcow2Reader(path)
	if err != nil {
		return nil, 0, err
	}
	f.Close()
	return func() (io.ReaderAt, io.Closer, error) {
		s, n, f, err := convert.Qcow2Reader(path)
		if err != nil {
			return nil, nil, err
		}
		if n != size {
			f.Close()
			return nil, nil, fmt.Errorf("%s changed while it was being uploaded", path)
		}
		return s, f, nil
	}, size, nil
}

// VirtualSize is the size of the disk an image file holds: a qcow2's virtual size, a raw file's size.
func VirtualSize(path string) (int64, error) {
	format, size, err := DetectFileFormat(path)
	if err != nil || format != disk.FormatQcow2 {
		return size, err
	}
	return qcow2VirtualSize(path)
}

// qcow2VirtualSize reads the virtual size from a qcow2's header.
func qcow2VirtualSize(path string) (int64, error) {
	r, f, err := convert.RawReader(path)
	if err != nil {
		return 0, err
	}
	f.Close()
	return r.Size(), nil
}

// Qcow2AsRaw opens the virtual disk of a qcow2 image: the bytes of the raw image it holds.
func Qcow2AsRaw(path string) Opener {
	return func() (io.ReaderAt, io.Closer, error) {
		r, f, err := convert.RawReader(path)
		return r, f, err
	}
}
