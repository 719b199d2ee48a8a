package sysext

import (
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/diskfs/go-diskfs/backend"
)

// readerBackend gives go-diskfs' squashfs reader a read-only backend.Storage over any
// io.ReaderAt, so an image inside another filesystem is read without a temporary copy.
func readerBackend(r io.ReaderAt, size int64) backend.Storage {
	return &roBackend{r: io.NewSectionReader(r, 0, size), size: size}
}

type roBackend struct {
	r    *io.SectionReader
	size int64
}

func (b *roBackend) Stat() (fs.FileInfo, error)                { return sizeInfo(b.size), nil }
func (b *roBackend) Read(p []byte) (int, error)                { return b.r.Read(p) }
func (b *roBackend) ReadAt(p []byte, off int64) (int, error)   { return b.r.ReadAt(p, off) }
func (b *roBackend) Seek(off int64, whence int) (int64, error) { return b.r.Seek(off, whence) }
func (b *roBackend) Close() error                              { return nil }
func (b *roBackend) Sys() (*os.File, error)                    { return nil, backend.ErrNotSuitable }
func (b *roBackend) Writable() (backend.WritableFile, error) {
	return nil, backend.ErrIncorrectOpenMode
}
func (b *roBackend) Path() string { return "" }

type sizeInfo int64

func (s sizeInfo) Name() string       { return "sysext" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() fs.FileMode  { return 0o400 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }
