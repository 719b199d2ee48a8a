// Package inspect reports what a Flatcar image will do on a target cloud: partitions, OEM
// settings, sysext files, first-boot flag, leftovers, MBR kind, and a readiness verdict.
package inspect

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// Verdict values; the CLI exits 1 for NotReady only.
const (
	Ready    = "READY"
	warning  = "WARNING"
	NotReady = "NOT READY"
)

// Finding levels: an error makes the image NOT READY, a warning makes it WARNING, info changes
// nothing (a fact worth showing, e.g. the harmless oem-qemu sysext of a retargeted image).
const (
	levelError   = "error"
	levelWarning = "warning"
	levelInfo    = "info"
)

// Report is the stable JSON document of `inspect -o json` (docs/inspect-json.md).
type Report struct {
	Image      string          `json:"image"`
	Format     disk.Format     `json:"format"`
	Size       int64           `json:"size"`
	Partitions []PartitionInfo `json:"partitions"`
	MBR        disk.MBRInfo    `json:"mbr"`
	OEM        oem.State       `json:"oem"`
	Sysext     []SysextEntry   `json:"sysext"`
	Markers    []string        `json:"markers"`
	SysextDir  bool            `json:"-"`         // the OEM partition has /sysext (Flatcar with OEM sysexts)
	GPTPrimary string          `json:"-"`         // why the primary GPT header is unusable ("" = fine; the table came from the backup)
	FirstBoot  *bool           `json:"firstBoot"` // nil when the ESP could not be read
	ESPError   string          `json:"-"`         // why the EFI-SYSTEM partition could not be read ("" = fine or absent)
	ConfigIgn  bool            `json:"configIgn"`
	Extensions Extensions      `json:"extensions"` // sysexts in ROOT (sysext.go)
	Containerd Containerd      `json:"containerd"` // preloaded images, containerd settings (images.go)
	Node       NodeSettings    `json:"node"`       // USB storage, official extensions, their server (node.go)
	Target     string          `json:"target"`
	Verdict    string          `json:"verdict"`
	Findings   []Finding       `json:"findings"`
}

// PartitionInfo is a GPT entry with its well-known type name.
type PartitionInfo struct {
	disk.Partition
	Type string `json:"type"` // "" for a type GUID Flatcar does not use
}

// Finding is one reason for the verdict.
type Finding struct {
	Level   string `json:"level"` // LevelError, LevelWarning or LevelInfo
	Code    string `json:"code"`
	Message string `json:"message"`
}

// newReport is a report with every list empty, not nil: `inspect -o json` prints [] for an empty
// list, never null (docs/inspect-json.md).
func newReport(path string) *Report {
	return &Report{Image: path, Partitions: []PartitionInfo{}, MBR: disk.MBRInfo{Types: []string{}},
		Sysext: []SysextEntry{}, Markers: []string{}, Findings: []Finding{},
		Extensions: Extensions{Links: []ExtensionLink{}, Stored: []StoredExtension{}},
		Containerd: Containerd{Images: []PreloadedImage{}, Kubeadm: []string{}, Missing: []string{}, DropIns: []string{},
			Registries: []RegistryHosts{}, AuthHosts: []string{}},
		Node: NodeSettings{EnabledSysext: []string{}}}
}

// Inspect reads img and judges it for target ("" = the image's own effective oem_id).
// A new section (e.g. sysext.go) adds its field to Report, a read step below, and its rules to
// rules.go's list.
func Inspect(img *disk.Image, target string) (*Report, error) {
	r := newReport(img.Path)
	r.Format, r.Size = img.Format, img.Size()
	parts, err := img.Partitions()
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		r.Partitions = append(r.Partitions, PartitionInfo{Partition: p, Type: disk.TypeNames[p.TypeGUID]})
	}
	if err := disk.PrimaryGPTError(img.Disk); err != nil {
		r.GPTPrimary = err.Error()
	}
	if r.MBR, err = disk.ReadMBR(img.Disk); err != nil {
		return nil, fmt.Errorf("%s: %w", img.Path, err)
	}
	if r.MBR.Types == nil {
		r.MBR.Types = []string{}
	}
	state, fsys, err := oem.ReadState(img)
	if err != nil {
		return nil, err
	}
	r.OEM = state
	if err := r.readSysext(fsys); err != nil {
		return nil, fmt.Errorf("%s: OEM partition: %w", img.Path, err)
	}
	if _, err := fsys.ReadFile("config.ign"); err == nil {
		r.ConfigIgn = true
	}
	esp := r.openESP(img, parts)
	r.FirstBoot = firstBootFlag(esp)
	root := r.readExtensions(img, parts, esp)
	r.readContainerd(root)
	r.readNode(root)
	r.Target = cmp.Or(target, state.Settings.OEMID)
	r.judge()
	return r, nil
}

// SysextEntry is one entry of the OEM partition's /sysext.
type SysextEntry struct {
	Name  string `json:"name"`
	IsDir bool   `json:"isDir,omitempty"`
	Size  int64  `json:"size"`
}

// readSysext lists /sysext: the OEM sysext images and the active-oem-<id> markers.
func (r *Report) readSysext(fsys fs.ReadDirFS) error {
	ents, err := fsys.ReadDir("sysext")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	r.SysextDir = true
	for _, e := range ents { // sorted by name
		switch {
		case strings.HasPrefix(e.Name(), markerPrefix):
			r.Markers = append(r.Markers, e.Name())
		case e.IsDir():
			r.Sysext = append(r.Sysext, SysextEntry{Name: e.Name(), IsDir: true})
		default:
			fi, err := e.Info()
			if err != nil {
				return err
			}
			r.Sysext = append(r.Sysext, SysextEntry{Name: e.Name(), Size: fi.Size()})
		}
	}
	return nil
}
