package disk

import (
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
)

func init() {
	qcow2Opener = func(f *os.File) (Storage, error) {
		r, err := qcow2.OpenFile(f)
		if err != nil {
			return nil, err
		}
		return &qcow2Storage{Reader: r, f: f}, nil
	}
}

// qcow2Storage is the read-only virtual disk of a qcow2 image.
type qcow2Storage struct {
	*qcow2.Reader
	f *os.File
}

func (s *qcow2Storage) WriteAt([]byte, int64) (int, error) { return 0, ErrReadOnly }
func (s *qcow2Storage) Close() error                       { return s.f.Close() }

// Qcow2 returns the qcow2 reader of a qcow2 image (nil for other formats); it is a qcow2.Source
// for qcow2.Write and qcow2.CopyToRaw.
func (img *Image) Qcow2() *qcow2.Reader {
	if s, ok := img.Storage.(*qcow2Storage); ok {
		return s.Reader
	}
	return nil
}
