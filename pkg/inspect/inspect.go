// Package inspect reports what a Flatcar image will do on a target cloud: partitions, OEM
// settings, sysext files, first-boot flag, leftovers, MBR kind, and a readiness verdict.
package inspect

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// Verdict values; the CLI exits 1 for NotReady only.
const (
	Ready    = "READY"
	Warning  = "WARNING"
	NotReady = "NOT READY"
)

// Report is the stable JSON document of `inspect -o json` (docs/inspect-json.md).
type Report struct {
	Image      string          `json:"image"`
	Format     disk.Format     `json:"format"`
	Size       int64           `json:"size"`
	Partitions []PartitionInfo `json:"partitions"`
	MBR        disk.MBRInfo    `json:"mbr"`
	OEM        oem.State       `json:"oem"`
	Sysext     []oem.Entry     `json:"sysext"`
	Markers    []string        `json:"markers"`
	FirstBoot  *bool           `json:"firstBoot"` // nil when the ESP could not be read
	ConfigIgn  bool            `json:"configIgn"`
	Target     string          `json:"target"`
	Verdict    string          `json:"verdict"`
	Findings   []Finding       `json:"findings"`
}

// PartitionInfo is a GPT entry with its well-known type name.
type PartitionInfo struct {
	disk.Partition
	Type string `json:"type,omitempty"`
}

// Finding is one reason for the verdict.
type Finding struct {
	Level   string `json:"level"` // "error" (NOT READY) or "warning"
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Inspect reads img and judges it for target ("" = the image's own effective oem_id).
func Inspect(img *disk.Image, target string) (*Report, error) {
	r := &Report{Image: img.Path, Format: img.Format, Size: img.Size(), Sysext: []oem.Entry{}, Markers: []string{}, Findings: []Finding{}}
	parts, err := img.Partitions()
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		r.Partitions = append(r.Partitions, PartitionInfo{Partition: p, Type: disk.TypeNames[p.TypeGUID]})
	}
	if r.MBR, err = disk.ReadMBR(img.Storage); err != nil {
		return nil, fmt.Errorf("%s: %w", img.Path, err)
	}
	state, fsys, err := oem.ReadState(img)
	if err != nil {
		return nil, err
	}
	r.OEM = state
	if err := r.readSysext(fsys); err != nil {
		return nil, fmt.Errorf("%s: OEM partition: %w", img.Path, err)
	}
	if _, err := fsys.ReadFile("/config.ign"); err == nil {
		r.ConfigIgn = true
	}
	r.FirstBoot = firstBootFlag(img, parts)
	r.Target = target
	if r.Target == "" {
		r.Target = state.Settings.OEMID
	}
	r.judge()
	return r, nil
}

// readSysext lists /sysext: the OEM sysext images and the active-oem-<id> markers.
func (r *Report) readSysext(fsys oem.Filesystem) error {
	ents, err := fsys.ReadDir("/sysext")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	for _, e := range ents {
		if strings.HasPrefix(e.Name, "active-oem-") {
			r.Markers = append(r.Markers, e.Name)
		} else {
			r.Sysext = append(r.Sysext, e)
		}
	}
	return nil
}

func (r *Report) add(level, code, format string, a ...any) {
	r.Findings = append(r.Findings, Finding{Level: level, Code: code, Message: fmt.Sprintf(format, a...)})
}

// judge applies the verdict rules: NOT READY when the effective oem_id differs from the target or a
// leftover /oem/config.ign would override cloud user-data; warnings do not block.
func (r *Report) judge() {
	s := r.OEM.Settings
	switch {
	case s.OEMID == "":
		r.add("error", "oem-id-missing", "no oem_id is set: the kernel command line gets an empty flatcar.oem.id, the initrd falls back to qemu and Ignition ignores %s user-data; fix: flatcar-capo oem set %s --id %s", r.Target, r.Image, r.Target)
	case s.OEMID != r.Target:
		r.add("error", "oem-id-mismatch", "oem_id is %q but the target is %q: Ignition and coreos-metadata would look for %s metadata; fix: flatcar-capo oem set %s --id %s", s.OEMID, r.Target, s.OEMID, r.Image, r.Target)
	}
	if r.ConfigIgn {
		r.add("error", "config-ign-leftover", "/oem/config.ign exists: it overrides cloud user-data on every boot; remove it when building the image")
	}
	if r.FirstBoot != nil && !*r.FirstBoot {
		r.add("warning", "first-boot-missing", "/flatcar/first_boot is missing on the ESP: Ignition will not run on the first boot of this image")
	}
	if strings.Contains(" "+s.LinuxAppend+" ", " "+oem.Autologin+" ") {
		r.add("warning", "autologin", "linux_append contains flatcar.autologin: a root shell on the serial/VNC console; fix: flatcar-capo oem set %s --id %s", r.Image, r.Target)
	}
	if r.MBR.Kind == disk.MBRHybrid {
		r.add("warning", "hybrid-mbr", "the image has a hybrid MBR (Flatcar before 4459.2.0): newer Nova rejects it (Launchpad bug 2091114); fix: flatcar-capo oem set %s --id %s --protective-mbr", r.Image, r.Target)
	}
	if id := r.OEM.OEMReleaseID; id != "" && id != s.OEMID {
		r.add("warning", "oem-release-differs", "oem-release says ID=%s while oem_id is %s: expected after retargeting a %s image; the %s sysext stays active, which is safe (changing it would make the initrd download another sysext at boot)", id, s.OEMID, id, id)
	}
	for _, m := range r.Markers {
		if id := strings.TrimPrefix(m, "active-oem-"); id != s.OEMID && id != r.OEM.OEMReleaseID {
			r.add("warning", "sysext-differs", "sysext marker %s differs from oem_id %s", m, s.OEMID)
		}
	}
	r.Verdict = Ready
	for _, f := range r.Findings {
		if f.Level == "error" {
			r.Verdict = NotReady
			return
		}
		r.Verdict = Warning
	}
}
