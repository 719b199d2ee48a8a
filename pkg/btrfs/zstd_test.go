package btrfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Flatcar's /usr may be zstd-compressed btrfs: files the kernel wrote with compress-force=zstd
// (an inline os-release and a multi-extent file) read back byte for byte.
func TestReadKernelZstd(t *testing.T) {
	testutil.RequireRoot(t, "mounting btrfs with compress-force=zstd so the kernel writes zstd extents")
	testutil.RequireTools(t, "mkfs.btrfs", "mount", "umount")
	dir := t.TempDir()
	img := filepath.Join(dir, "usr.btrfs")
	osRelease := []byte("NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\nVERSION=4459.2.0\nVERSION_ID=4459.2.0\nBUILD_ID=2025-01-01\nSYSEXT_LEVEL=1.0\nPRETTY_NAME=\"Flatcar Container Linux by Kinvolk 4459.2.0 (Oklo)\"\nANSI_COLOR=\"38;5;75\"\nHOME_URL=\"https://flatcar.org/\"\n")
	var big bytes.Buffer
	for i := 0; big.Len() < 300<<10; i++ {
		fmt.Fprintf(&big, "line %d of a compressible library file in /usr\n", i)
	}
	testutil.KernelZstdBtrfs(t, img, 128<<20, "USR-A", map[string][]byte{"lib/os-release": osRelease, "lib/big": big.Bytes()})
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs, err := Open(f, 128<<20)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][]byte{"/lib/os-release": osRelease, "/lib/big": big.Bytes()} {
		if e := firstExtent(t, fs, p); e.compression != compressZstd {
			t.Fatalf("%s: the kernel wrote compression %d, not zstd; the test proves nothing", p, e.compression)
		}
		got, err := fs.read(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes that differ from the %d written", p, len(got), len(want))
		}
	}
}
