package testutil

import (
	"os"
	"testing"
)

// PatchFile reads n bytes of the file at path from off, lets fix change them and writes them
// back in place: how a test crafts or damages a fixture. An I/O error fails the test.
func PatchFile(t testing.TB, path string, off int64, n int, fix func(b []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	fix(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// FlipByte inverts the byte at off of the file at path.
func FlipByte(t testing.TB, path string, off int64) {
	t.Helper()
	PatchFile(t, path, off, 1, func(b []byte) { b[0] ^= 0xff })
}
