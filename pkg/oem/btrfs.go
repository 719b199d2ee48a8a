package oem

import (
	"errors"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// btrfsFS is Flatcar's OEM filesystem since 2983.x, read and edited by pkg/btrfs in place.
type btrfsFS struct {
	dev vdisk.Disk
	fs  *btrfs.FS
}

func openBtrfs(dev vdisk.Disk) (Filesystem, error) {
	f, err := btrfs.Open(dev, dev.Size())
	if err != nil {
		return nil, err
	}
	return &btrfsFS{dev: dev, fs: f}, nil
}

func (b *btrfsFS) Type() string                         { return "btrfs" }
func (b *btrfsFS) ReadFile(name string) ([]byte, error) { return b.fs.ReadFile(name) }

// WriteFile rewrites name in place. Content too big for that gets a message saying so and
// what to do, not the btrfs package's "unsupported layout".
func (b *btrfsFS) WriteFile(name string, data []byte) error {
	err := b.fs.WriteFile(b.dev, name, data)
	if errors.Is(err, btrfs.ErrNoRoom) {
		return &NoRoomError{File: name, Size: len(data), MaxStored: b.fs.MaxInline(), detail: err}
	}
	return err
}

// NoRoomError is a file too big for the in-place rewrite of a btrfs OEM partition. Nothing was
// written when it is returned.
type NoRoomError struct {
	File      string
	Size      int // bytes of the new content
	MaxStored int // most bytes one inline extent stores (compressed content up to a sector may fit)
	detail    error
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("the new %s (%d bytes) does not fit in the btrfs OEM partition: flatcar-capo rewrites a btrfs file in place "+
		"as one inline extent, which stores at most %d bytes (zlib-compressed when that helps), and its tree leaf must have room too. "+
		"Nothing was written. Shorten --linux-append (kernel arguments added by earlier runs stay: start again from the original "+
		"image to drop them), or pass long kernel arguments another way (Ignition's kernelArguments)",
		e.File, e.Size, e.MaxStored)
}

func (e *NoRoomError) Unwrap() error { return e.detail }

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
