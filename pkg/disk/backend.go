package disk

import (
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/diskfs/go-diskfs/backend"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Backend adapts a virtual disk (usually a partition Section) to go-diskfs's backend.Storage, so
// its ext4, FAT and squashfs drivers read (and, when writable, write) inside it only.
func Backend(dev vdisk.Disk, writable bool) backend.Storage {
	return &deviceBackend{dev: dev, r: io.NewSectionReader(dev, 0, dev.Size()), writable: writable}
}

type deviceBackend struct {
	dev      vdisk.Disk
	r        *io.SectionReader
	writable bool
}

func (d *deviceBackend) Stat() (fs.FileInfo, error)                { return sizeInfo(d.dev.Size()), nil }
func (d *deviceBackend) Read(p []byte) (int, error)                { return d.r.Read(p) }
func (d *deviceBackend) ReadAt(p []byte, off int64) (int, error)   { return d.dev.ReadAt(p, off) }
func (d *deviceBackend) WriteAt(p []byte, off int64) (int, error)  { return d.dev.WriteAt(p, off) }
func (d *deviceBackend) Seek(off int64, whence int) (int64, error) { return d.r.Seek(off, whence) }
func (d *deviceBackend) Close() error                              { return nil }
func (d *deviceBackend) Sys() (*os.File, error)                    { return nil, backend.ErrNotSuitable }
func (d *deviceBackend) Path() string                              { return "" }
func (d *deviceBackend) Writable() (backend.WritableFile, error) {
	if !d.writable {
		return nil, backend.ErrIncorrectOpenMode
	}
	return d, nil
}

type sizeInfo int64

func (s sizeInfo) Name() string       { return "partition" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() fs.FileMode  { return 0o600 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }
