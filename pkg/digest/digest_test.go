package digest

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileDigests(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	// FIPS 180-2's "abc" vectors.
	if sum, n, err := SHA256(p); err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("SHA256 = %s, %d, %v", sum, n, err)
	}
	if sum, _, err := SHA512(p); err != nil || sum != "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f" {
		t.Errorf("SHA512 = %s, %v", sum, err)
	}
	if _, _, err := SHA512(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestFilesReadsOnceForEveryHash(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	sums, n, err := Files(p, sha256.New(), sha512.New())
	s256, _, _ := SHA256(p)
	s512, _, _ := SHA512(p)
	if err != nil || n != 3 || len(sums) != 2 || sums[0] != s256 || sums[1] != s512 {
		t.Errorf("Files = %v, %d, %v; want [%s %s]", sums, n, err, s256, s512)
	}
	if _, _, err := Files(t.TempDir(), sha256.New()); err == nil || !strings.Contains(err.Error(), "reading ") {
		t.Errorf("reading a directory: %v, want an error naming it", err)
	}
}

// A cancelled hash (verify's Ctrl-C or SIGTERM on a large image) stops within one read and says
// so, rather than reading the file to its end.
func TestFilesContextStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &countingReader{}
	if _, _, err := Reader(ctx, "endless", r, sha256.New()); !errors.Is(err, context.Canceled) || r.n > 0 {
		t.Errorf("Reader on a cancelled context: %v after %d bytes", err, r.n)
	}
	if _, _, err := FilesContext(ctx, "/dev/zero", sha512.New()); !errors.Is(err, context.Canceled) {
		t.Errorf("FilesContext(/dev/zero) on a cancelled context: %v", err)
	}
}

type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) { c.n += len(p); return len(p), nil }
