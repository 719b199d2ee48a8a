package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// ReadFS is every filesystem flatcar-capo reads in an image (ext4, FAT and squashfs through
// go-diskfs, btrfs through pkg/btrfs), in io/fs's shape.
type ReadFS interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
	Type() string // "btrfs", "ext4", "FAT" or "squashfs"
}

// WritableFS adds the one edit made in place, the OEM step's: WriteFile replaces (or creates) a
// small file. It fails on a read-only device and on FAT and squashfs.
type WritableFS interface {
	ReadFS
	WriteFile(name string, data []byte) error
}

// ErrUnknownFS means a partition holds none of the filesystems OpenFS reads.
var ErrUnknownFS = errors.New("unknown filesystem")

// DetectFS names the filesystem on dev from its superblock magic: btrfs at 64 KiB + 0x40,
// ext2/3/4 at 1 KiB + 0x38, squashfs at 0, FAT's boot sector signature and type string. Flatcar's
// OEM switched from ext4 to btrfs in 2983.x, so the version alone does not tell. A read failure
// (a corrupt qcow2 cluster, an I/O error) is returned as such, not as ErrUnknownFS.
func DetectFS(dev io.ReaderAt) (string, error) {
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
	var bs [512]byte
	n, err = dev.ReadAt(bs[:], 0)
	if err := vdisk.ReadFailure(err); err != nil {
		return "", fmt.Errorf("reading the first sector: %w", err)
	}
	switch {
	case n >= 4 && string(bs[:4]) == "hsqs":
		return "squashfs", nil
	case n == 512 && bs[510] == 0x55 && bs[511] == 0xAA && (string(bs[0x36:0x39]) == "FAT" || string(bs[0x52:0x55]) == "FAT"):
		return "FAT", nil
	}
	return "", ErrUnknownFS
}

// OpenFS opens the filesystem on dev (a partition), whichever DetectFS finds; name names it in
// errors ("partition 6 (OEM)"). A read-only dev makes WriteFile fail.
func OpenFS(dev vdisk.Disk, name string) (WritableFS, error) {
	kind, err := DetectFS(dev)
	switch {
	case errors.Is(err, ErrUnknownFS):
		return nil, fmt.Errorf("%s has an %w (no btrfs, ext4, squashfs or FAT superblock)", name, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch kind {
	case "btrfs":
		f, err := btrfs.Open(dev, dev.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	case "ext4":
		return OpenExt4(dev, name)
	case "FAT":
		return OpenFAT(dev, name)
	}
	var sb [16]byte
	if _, err := dev.ReadAt(sb[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading the squashfs superblock: %w", name, err)
	}
	return OpenSquashfs(dev, dev.Size(), int64(binary.LittleEndian.Uint32(sb[12:])), name)
}
