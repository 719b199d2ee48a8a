package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"
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

// Tar is an uncompressed tar of files (path -> content; mode 0755, root-owned, time 0, parent
// directories first, then the files by name): the same files give the same bytes.
func Tar(files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := slices.Sorted(maps.Keys(files))
	dirs := map[string]bool{}
	for _, n := range names {
		for d := filepath.Dir(n); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)})
	}
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		tw.Write(files[n])
	}
	tw.Close()
	return buf.Bytes()
}

// TarGz is Tar gzip'ed, the shape of release tarballs (crictl, the CNI plugins).
func TarGz(files map[string][]byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(Tar(files))
	gz.Close()
	return buf.Bytes()
}
