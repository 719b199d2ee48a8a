package packer

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	packerfiles "github.com/flatcar-capo/flatcar-capo/packer"
)

// prepareWorkDir makes the private build directory (0700: it holds the build user's key
// material next to it and the packer log) and writes the provisioning scripts into it.
func prepareWorkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	return fs.WalkDir(packerfiles.FS, "scripts", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if e.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := packerfiles.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o700)
	})
}
