package cli_test

import (
	"os"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeRaw makes a sparse raw file of size bytes with an MBR boot signature.
func writeRaw(t *testing.T, path string, size int64) {
	t.Helper()
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xaa
	writeFile(t, path, string(mbr))
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}
