package oem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Filesystem is the OEM partition's filesystem, whichever it is.
type Filesystem interface {
	Type() string
	// ReadFile returns a file's content; the error wraps fs.ErrNotExist when it is missing.
	ReadFile(name string) ([]byte, error)
	// WriteFile replaces (or creates) a small file in place.
	WriteFile(name string, data []byte) error
	// ReadDir lists a directory; the error wraps fs.ErrNotExist when it is missing.
	ReadDir(name string) ([]Entry, error)
}

// Entry is a directory entry.
type Entry struct {
	Name  string `json:"name"`
	IsDir bool   `json:"isDir,omitempty"`
	Size  int64  `json:"size"`
}

// ErrUnknownFilesystem means the OEM partition holds neither btrfs nor ext4.
var ErrUnknownFilesystem = errors.New("unknown filesystem")

// DetectFilesystem reads the superblock magic: btrfs at 64 KiB + 0x40, ext2/3/4 at 1 KiB + 0x38.
// Flatcar switched from ext4 to btrfs in 2983.x, so the version alone does not tell.
// A read failure (a corrupt qcow2 cluster, an I/O error) is returned as such, not as an unknown
// filesystem.
func DetectFilesystem(dev io.ReaderAt) (string, error) {
	var b [8]byte
	n, err := dev.ReadAt(b[:], 0x10000+0x40)
	if n == 8 && string(b[:]) == "_BHRfS_M" {
		return "btrfs", nil
	}
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the btrfs superblock: %w", err)
	}
	n, err = dev.ReadAt(b[:2], 0x400+0x38)
	if n == 2 && binary.LittleEndian.Uint16(b[:2]) == 0xEF53 {
		return "ext4", nil
	}
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the ext4 superblock: %w", err)
	}
	return "", ErrUnknownFilesystem
}

// OpenFilesystem opens the filesystem on dev, which name names in errors ("partition 6 (OEM)").
// A read-only dev makes WriteFile fail.
func OpenFilesystem(dev vdisk.Disk, name string) (Filesystem, error) {
	kind, err := DetectFilesystem(dev)
	switch {
	case errors.Is(err, ErrUnknownFilesystem):
		return nil, fmt.Errorf("%s has an unknown filesystem (no btrfs or ext4 superblock); flatcar-capo reads btrfs and ext4 (Flatcar's OEM is btrfs since 2983.x, ext4 before)", name)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch kind {
	case "btrfs":
		return openBtrfs(dev)
	default:
		return openExt4(dev, name)
	}
}
