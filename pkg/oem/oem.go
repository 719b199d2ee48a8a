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

// PartitionName is the GPT name of Flatcar's OEM partition.
const PartitionName = "OEM"

// GrubCfgPath is the OEM grub.cfg, an io/fs name in the OEM filesystem (/oem/grub.cfg when mounted).
const GrubCfgPath = "grub.cfg"

// Autologin is the kernel argument that gives a root shell on the console; production images drop it.
const Autologin = "flatcar.autologin"

// Partition opens the OEM partition's filesystem of img.
func Partition(img *disk.Image) (disk.Partition, disk.WritableFS, error) {
	p, err := img.FindPartition(PartitionName)
	if err != nil {
		return p, nil, err
	}
	fsys, err := openFS(img.Section(p), disk.PartitionName(p))
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
	p, fsys, err := Partition(img)
	if err != nil {
		return State{}, nil, err
	}
	st := State{Partition: p.Number, Filesystem: fsys.Type()}
	data, err := fsys.ReadFile(GrubCfgPath)
	switch {
	case err == nil:
		st.GrubCfg = true
		if err := CheckGrubConfig(data); err != nil {
			return st, fsys, fmt.Errorf("%s: OEM %w", img.Path, err)
		}
		st.Settings = ParseGrubConfig(data).Settings()
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
