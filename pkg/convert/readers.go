package convert

import (
	"fmt"
	"io"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// The readers of a consumer that sends an image's bytes elsewhere (glance's upload), opened
// afresh on every call (an upload may start again), with their length known before a byte moves.

// RawReader opens the raw bytes of the image at path: a qcow2's virtual disk (holes read as
// zeros), a raw file as it is. Closing the Closer closes the file.
func RawReader(path string) (vdisk.Disk, io.Closer, error) {
	img, err := disk.Open(path, false)
	if err != nil {
		return nil, nil, err
	}
	return img, img, nil
}

// Qcow2Reader streams the raw image at path as a qcow2 image made on the fly (no temporary
// file, the raw file's holes left out), with the qcow2's length.
func Qcow2Reader(path string) (io.ReaderAt, int64, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, err
	}
	s, err := qcow2.NewStreamWriter(f)
	if err != nil {
		f.Close()
		return nil, 0, nil, fmt.Errorf("streaming %s as qcow2: %w", path, err)
	}
	return s, s.Size(), f, nil
}
