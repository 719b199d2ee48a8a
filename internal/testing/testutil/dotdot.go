package testutil

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"
)

// DotDotIno reads a directory's ".." entry as the kernel lists it (getdents64): the inode's
// parent field, which a filesystem writer may get wrong while the path's parent is right.
func DotDotIno(t testing.TB, dir string) uint64 {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	buf := make([]byte, 1<<16)
	n, err := syscall.Getdents(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	for b := buf[:n]; len(b) >= 19; {
		ino, reclen := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint16(b[16:])
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == ".." {
			return ino
		}
		b = b[reclen:]
	}
	t.Fatalf("%s: no .. entry", dir)
	return 0
}
