package testutil

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"testing"
)

// SHA256File is the hex sha256 of the file at p; a read error fails the test.
func SHA256File(t testing.TB, p string) string { t.Helper(); return hashFile(t, p, sha256.New()) }

// SHA512File is the hex sha512 of the file at p; a read error fails the test.
func SHA512File(t testing.TB, p string) string { t.Helper(); return hashFile(t, p, sha512.New()) }

func hashFile(t testing.TB, p string, h hash.Hash) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
