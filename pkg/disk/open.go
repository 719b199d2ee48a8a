package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

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
	return infile.OpenChecked(path, flag, func(st fs.FileInfo) error { return CheckFileInfo(path, st) },
		func(err error) error { return openError(path, writable, err) })
}

// CheckFile is OpenFile's refusal without opening: for a path checked before any work starts
// (build --base-image).
func CheckFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return openError(path, false, err)
	}
	return CheckFileInfo(path, st)
}

// CheckFileInfo refuses what st says cannot be a disk image; the error wraps ErrNotDiskImage and,
// as a wrong argument rather than a failed run, errs.ErrInvalid (exit code 2, as upload always had).
func CheckFileInfo(path string, st fs.FileInfo) error {
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
