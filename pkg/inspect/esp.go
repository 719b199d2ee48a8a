package inspect

import (
	"io/fs"
	"slices"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// openESP reads the EFI-SYSTEM partition's FAT read-only (the drivers may update access times);
// nil when there is none or it cannot be read (then ESPError says why).
func (r *Report) openESP(img *disk.Image, parts []disk.Partition) *disk.FS {
	p, ok := disk.Find(parts, "EFI-SYSTEM")
	if !ok {
		return nil
	}
	fsys, err := disk.OpenFAT(vdisk.Protect(img.Section(p)), disk.PartitionName(p))
	if err != nil {
		r.ESPError = err.Error()
		return nil
	}
	return fsys
}

// firstBootFlag reports whether /flatcar/first_boot exists on the EFI-SYSTEM partition (GRUB
// then adds flatcar.first_boot=detected and Ignition runs); nil when the ESP cannot be read.
func firstBootFlag(esp *disk.FS) *bool {
	if esp == nil {
		return nil
	}
	ents, err := esp.ReadDir("flatcar")
	found := err == nil && slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == "first_boot" })
	return &found
}
