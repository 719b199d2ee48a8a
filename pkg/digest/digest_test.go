package digest

import (
	"os"
	"path/filepath"
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
