package oem

import (
	"errors"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// openFS opens the OEM partition's filesystem on dev, which name names in errors ("partition 6
// (OEM)"): btrfs or ext4, the two Flatcar has shipped. A read-only dev makes WriteFile fail.
func openFS(dev vdisk.Disk, name string) (disk.WritableFS, error) {
	fsys, err := disk.OpenFS(dev, name)
	if errors.Is(err, disk.ErrUnknownFS) || err == nil && fsys.Type() != "btrfs" && fsys.Type() != "ext4" {
		return nil, fmt.Errorf("%s has an unknown filesystem (no btrfs or ext4 superblock); flatcar-capo reads btrfs and ext4 (Flatcar's OEM is btrfs since 2983.x, ext4 before)", name)
	}
	if err != nil {
		if kind, _ := disk.DetectFS(dev); kind == "ext4" { // the wording oem has always had
			return nil, fmt.Errorf("the ext4 filesystem cannot be read (corrupt superblock or checksum?): %v", err)
		}
	}
	return fsys, err
}
