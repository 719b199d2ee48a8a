// Package oem reads and changes the OEM settings of a Flatcar image: the OEM partition's grub.cfg
// (oem_id, linux_append, linux_console), which Flatcar's GRUB sources to build the kernel
// command line `... flatcar.oem.id=$oem_id $linux_append`.
package oem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// partitionName is the GPT name of Flatcar's OEM partition.
const partitionName = "OEM"

// grubCfgPath is the OEM grub.cfg, an io/fs name in the OEM filesystem (/oem/grub.cfg when mounted).
const grubCfgPath = "grub.cfg"

// Autologin is the kernel argument that gives a root shell on the console; production images drop it.
const Autologin = "flatcar.autologin"

// partition opens the OEM partition's filesystem of img: btrfs or ext4, the two Flatcar has
// shipped. A read-only img makes WriteFile fail.
func partition(img *disk.Image) (disk.Partition, disk.WritableFS, error) {
	p, err := img.FindPartition(partitionName)
	if err != nil {
		return p, nil, err
	}
	dev, name := img.Section(p), disk.PartitionName(p)
	fsys, err := disk.OpenFS(dev, name)
	switch {
	case errors.Is(err, disk.ErrUnknownFS) || err == nil && fsys.Type() != "btrfs" && fsys.Type() != "ext4":
		err = fmt.Errorf("%s has an unknown filesystem (no btrfs or ext4 superblock); flatcar-capo reads btrfs and ext4 (Flatcar's OEM is btrfs since 2983.x, ext4 before)", name)
	case err != nil:
		if kind, _ := disk.DetectFS(dev); kind == "ext4" { // the wording oem has always had
			err = fmt.Errorf("the ext4 filesystem cannot be read (corrupt superblock or checksum?): %v", err)
		}
	}
	if err != nil {
		return p, nil, fmt.Errorf("%s: %w", img.Path, err) // err names the partition
	}
	return p, fsys, nil
}

// State is what the OEM partition says.
type State struct {
	Partition    int      `json:"partition"`
	Filesystem   string   `json:"filesystem"`
	GrubCfg      bool     `json:"grubCfg"` // whether /grub.cfg exists
	Settings     Settings `json:"settings"`
	OEMReleaseID string   `json:"oemReleaseId"` // "" when /oem-release is missing or has no ID=
}

// ReadState reads grub.cfg and oem-release.
func ReadState(img *disk.Image) (State, disk.WritableFS, error) {
	p, fsys, err := partition(img)
	if err != nil {
		return State{}, nil, err
	}
	st := State{Partition: p.Number, Filesystem: fsys.Type()}
	data, err := fsys.ReadFile(grubCfgPath)
	switch {
	case err == nil:
		st.GrubCfg = true
		if err := checkGrubConfig(data); err != nil {
			return st, fsys, fmt.Errorf("%s: OEM %w", img.Path, err)
		}
		st.Settings = parseGrubConfig(data).Settings()
	case !errors.Is(err, fs.ErrNotExist):
		return st, fsys, fmt.Errorf("%s: reading OEM grub.cfg: %w", img.Path, err)
	}
	if rel, err := fsys.ReadFile("oem-release"); err == nil {
		st.OEMReleaseID = osReleaseValue(rel, "ID")
	}
	return st, fsys, nil
}

// osReleaseValue returns KEY's value from an os-release style file.
func osReleaseValue(data []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k == key {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// noRoomError is a file too big for the in-place rewrite of a btrfs OEM partition. Nothing was
// written when it is returned.
type noRoomError struct {
	File      string
	Size      int // bytes of the new content
	MaxStored int // most bytes one inline extent stores (compressed content up to a sector may fit)
	detail    error
}

func (e *noRoomError) Error() string {
	return fmt.Sprintf("the new %s (%d bytes) does not fit in the btrfs OEM partition: flatcar-capo rewrites a btrfs file in place "+
		"as one inline extent, which stores at most %d bytes (zlib-compressed when that helps), and its tree leaf must have room too. "+
		"Nothing was written. Shorten --linux-append (kernel arguments added by earlier runs stay: start again from the original "+
		"image to drop them), or pass long kernel arguments another way (Ignition's kernelArguments)",
		e.File, e.Size, e.MaxStored)
}

func (e *noRoomError) Unwrap() error { return e.detail }
