package testutil

import (
	"archive/tar"
	"io"
	"testing"
)

// EachTarEntry calls fn with every entry of the tar stream r and that entry's contents; a
// broken stream fails the test.
func EachTarEntry(t testing.TB, r io.Reader, fn func(h *tar.Header, body io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(h, tr)
	}
}
