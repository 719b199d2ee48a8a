package oem

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// ext4FS goes through go-diskfs (disk.FS). Its writes are in place; O_TRUNC is ignored and Remove
// followed by a re-create corrupts the filesystem, so a shorter file is written over and then
// truncated.
type ext4FS struct{ fs *disk.FS }

func openExt4(dev vdisk.Disk, name string) (Filesystem, error) {
	f, err := disk.OpenExt4(dev, name)
	if err != nil {
		return nil, fmt.Errorf("the ext4 filesystem cannot be read (corrupt superblock or checksum?): %v", err)
	}
	return &ext4FS{fs: f}, nil
}

func (e *ext4FS) Type() string { return "ext4" }

func (e *ext4FS) ReadFile(name string) ([]byte, error) {
	if ok, err := e.exists(name); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		}
		return nil, err
	}
	f, err := e.fs.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("ext4: %s: %v", name, err)
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (e *ext4FS) exists(name string) (bool, error) {
	dir, base := path.Split(path.Clean("/" + name))
	ents, err := e.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	for _, ent := range ents {
		if ent.Name == base {
			return true, nil
		}
	}
	return false, nil
}

func (e *ext4FS) WriteFile(name string, data []byte) error {
	ok, err := e.exists(name)
	if err != nil {
		return err
	}
	flag := os.O_RDWR
	if !ok {
		flag |= os.O_CREATE
	}
	f, err := e.fs.OpenFile(name, flag)
	if err != nil {
		return fmt.Errorf("ext4: cannot open %s for writing: %v", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("ext4: writing %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ext4: closing %s: %v", name, err)
	}
	return e.fs.Truncate(name, int64(len(data)))
}

func (e *ext4FS) ReadDir(name string) ([]Entry, error) {
	infos, err := e.fs.ReadDir(name)
	if err != nil {
		if strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "does not exist") {
			return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("ext4: reading directory %s: %v", name, err)
	}
	out := make([]Entry, 0, len(infos))
	for _, fi := range infos {
		if fi.Name() == "." || fi.Name() == ".." || fi.Name() == "lost+found" {
			continue
		}
		var size int64
		if info, err := fi.Info(); err == nil {
			size = info.Size()
		}
		out = append(out, Entry{Name: fi.Name(), IsDir: fi.IsDir(), Size: size})
	}
	return out, nil
}
