package testutil

import (
	"os"
	"path/filepath"
)

// CachedPacker112 is where scripts/install-packer.sh keeps the packer 1.12.0 it builds (the file
// may not exist); its QEMU plugin lives in the `plugins` directory next to it.
func CachedPacker112() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "flatcar-capo", "packer", "1.12.0", "packer")
}
