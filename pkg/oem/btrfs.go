package oem

import (
	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
)

// btrfsFS is Flatcar's OEM filesystem since 2983.x, read and edited by pkg/btrfs in place.
type btrfsFS struct {
	dev Device
	fs  *btrfs.FS
}

func openBtrfs(dev Device) (Filesystem, error) {
	f, err := btrfs.Open(dev, dev.Size())
	if err != nil {
		return nil, err
	}
	return &btrfsFS{dev: dev, fs: f}, nil
}

func (b *btrfsFS) Type() string                             { return "btrfs" }
func (b *btrfsFS) ReadFile(name string) ([]byte, error)     { return b.fs.ReadFile(name) }
func (b *btrfsFS) WriteFile(name string, data []byte) error { return b.fs.WriteFile(b.dev, name, data) }

func (b *btrfsFS) ReadDir(name string) ([]Entry, error) {
	ents, err := b.fs.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(ents))
	for _, e := range ents {
		out = append(out, Entry{Name: e.Name, IsDir: e.IsDir, Size: e.Size})
	}
	return out, nil
}
