package rootfs

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
)

// ReaderAt opens a regular file of a go-diskfs ext4 filesystem for random access. go-diskfs
// v1.9.4's File.Read panics (negative makeslice) when a read starts inside the first block after
// the end of an extent, other than at that block's start: it skips only extents ending before
// that block. Reads through this ReaderAt always start on a block boundary (the block is read
// whole and trimmed), which that code handles, so a squashfs inside ROOT can be read in place.
func ReaderAt(fsys *ext4.FileSystem, p string) (io.ReaderAt, int64, error) {
	fi, err := fsys.Stat(p)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("/%s is not a regular file", p)
	}
	f, err := fsys.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return nil, 0, err
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		return nil, 0, fmt.Errorf("/%s: the ext4 file cannot seek", p)
	}
	return &alignedReader{rs: rs, size: fi.Size()}, fi.Size(), nil
}

type alignedReader struct {
	mu   sync.Mutex
	rs   io.ReadSeeker
	size int64
}

func (a *alignedReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= a.size {
		return 0, io.EOF
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	start := off / blockSize * blockSize
	end := min(off+int64(len(p)), a.size)
	if _, err := a.rs.Seek(start, io.SeekStart); err != nil {
		return 0, err
	}
	buf := make([]byte, end-start)
	if _, err := io.ReadFull(a.rs, buf); err != nil {
		return 0, err
	}
	n := copy(p, buf[off-start:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
