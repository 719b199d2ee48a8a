package inspect

import (
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/fat32"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// firstBootFlag reports whether /flatcar/first_boot exists on the EFI-SYSTEM partition (GRUB
// then adds flatcar.first_boot=detected and Ignition runs); nil when the ESP cannot be read.
func firstBootFlag(img *disk.Image, parts []disk.Partition) *bool {
	for _, p := range parts {
		if p.Name != "EFI-SYSTEM" {
			continue
		}
		b := disk.Backend(vdisk.Protect(img.Section(p)), true)
		var fsys filesystem.FileSystem
		if f, err := fat32.Read(b, p.Size, 0, 512); err == nil {
			fsys = f
		} else if f, err := fat16.Read(b, p.Size, 0, 512); err == nil {
			fsys = f
		} else {
			return nil
		}
		found := false
		if infos, err := fsys.ReadDir("flatcar"); err == nil { // go-diskfs takes io/fs-style paths
			for _, fi := range infos {
				if fi.Name() == "first_boot" {
					found = true
				}
			}
		}
		return &found
	}
	return nil
}
