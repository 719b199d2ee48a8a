package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// KernelZstdBtrfs makes at path a btrfs of size bytes labelled label, whose files (path relative
// to its root -> content) the kernel writes through a loop mount with compress-force=zstd, as on
// a zstd-compressed Flatcar /usr. It needs root: the caller requires it.
func KernelZstdBtrfs(t testing.TB, path string, size int64, label string, files map[string][]byte) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	MustRun(t, "mkfs.btrfs", "-q", "-L", label, path)
	mnt := t.TempDir()
	MustRun(t, "mount", "-o", "loop,compress-force=zstd", path, mnt)
	var werr error
	for p, b := range files {
		if werr = os.MkdirAll(filepath.Dir(filepath.Join(mnt, p)), 0o755); werr == nil {
			werr = os.WriteFile(filepath.Join(mnt, p), b, 0o644)
		}
		if werr != nil {
			break
		}
	}
	exec.Command("sync").Run()
	MustRun(t, "umount", mnt) // before a write error fails the test, so nothing stays mounted
	if werr != nil {
		t.Fatal(werr)
	}
}
