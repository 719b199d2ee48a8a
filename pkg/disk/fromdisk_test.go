package disk

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// An Image made by FromDisk for reading refuses writes, so a step that only reads (the build's
// inspect and epoch reads of its overlay) cannot change the disk; made writable, it writes.
func TestFromDiskHonoursWritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.raw")
	if err := os.WriteFile(path, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := vdisk.NewFile(f, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromDisk(path, d, false).Disk.WriteAt([]byte("x"), 0); !errors.Is(err, vdisk.ErrReadOnly) {
		t.Errorf("WriteAt on a read-only FromDisk image: %v, want vdisk.ErrReadOnly", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, make([]byte, 8192)) {
		t.Error("a read-only FromDisk image wrote to its disk")
	}
	if _, err := FromDisk(path, d, true).Disk.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("WriteAt on a writable FromDisk image: %v", err)
	}
	if got, _ := os.ReadFile(path); got[0] != 'x' {
		t.Error("a writable FromDisk image did not write")
	}
}
