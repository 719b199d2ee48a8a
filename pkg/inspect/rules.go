package inspect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// markerPrefix names the files in /oem/sysext that select the active OEM sysext.
const markerPrefix = "active-oem-"

// rule adds the findings of one concern to r. Each finding code is documented in
// docs/inspect-json.md and has a table test in rules_test.go.
type rule func(r *Report)

// rules run in this order; findings appear in the same order.
var rules = []rule{
	ruleOEMID,
	ruleConfigIgn,
	ruleOEMSysextMissing,
	ruleFirstBoot,
	ruleESPUnreadable,
	ruleAutologin,
	ruleHybridMBR,
	ruleGPTFromBackup,
	ruleOEMReleaseDiffers,
	ruleMarkerDiffers,
	ruleSysextLinks,
	ruleContainerd,
	ruleImages,
}

// judge applies the rules and sets the verdict: NOT READY on any error, WARNING on any warning.
func (r *Report) judge() {
	r.Findings = []Finding{}
	for _, apply := range rules {
		apply(r)
	}
	r.Verdict = Ready
	for _, f := range r.Findings {
		switch f.Level {
		case levelError:
			r.Verdict = NotReady
			return
		case levelWarning:
			r.Verdict = warning
		}
	}
}

func (r *Report) add(level, code, format string, a ...any) {
	r.Findings = append(r.Findings, Finding{Level: level, Code: code, Message: fmt.Sprintf(format, a...)})
}

// The effective oem_id must be the target's: it becomes flatcar.oem.id, which picks Ignition's
// platform and coreos-metadata's provider.
func ruleOEMID(r *Report) {
	s := r.OEM.Settings
	switch {
	case s.OEMID == "":
		r.add(levelError, "oem-id-missing", "no oem_id is set: the kernel command line gets an empty flatcar.oem.id, the initrd falls back to qemu and Ignition ignores %s user-data; fix: flatcar-capo oem set %s --id %s", r.Target, r.Image, r.Target)
	case s.OEMID != r.Target:
		r.add(levelError, "oem-id-mismatch", "oem_id is %q but the target is %q: Ignition and coreos-metadata would look for %s metadata; fix: flatcar-capo oem set %s --id %s", s.OEMID, r.Target, s.OEMID, r.Image, r.Target)
	}
}

// A leftover /oem/config.ign wins over cloud user-data on every boot.
func ruleConfigIgn(r *Report) {
	if r.ConfigIgn {
		r.add(levelError, "config-ign-leftover", "/oem/config.ign exists: it overrides cloud user-data on every boot; remove it when building the image")
	}
}

// The initrd merges the OEM sysext named by oem-release's ID= and by each active-oem-<id>
// marker; when /oem/sysext lacks oem-<id>-<version>.raw it downloads it from Flatcar's update
// server, so the first boot fails without internet. Images from before OEM sysexts (no
// /oem/sysext at all) are not judged by oem-release.
func ruleOEMSysextMissing(r *Report) {
	type need struct{ id, why string }
	var needs []need
	if id := r.OEM.OEMReleaseID; id != "" && (r.SysextDir || len(r.Markers) > 0) {
		needs = append(needs, need{id, "/oem/oem-release says ID=" + id})
	}
	for _, m := range r.Markers {
		id := strings.TrimPrefix(m, markerPrefix)
		if id != r.OEM.OEMReleaseID { // oem-release's ID is already needed above
			needs = append(needs, need{id, "the marker /oem/sysext/" + m + " exists"})
		}
	}
	for _, n := range needs {
		if r.hasOEMSysext(n.id) {
			continue
		}
		r.add(levelError, "oem-sysext-missing", "%s but /oem/sysext/oem-%s-<version>.raw is missing: Flatcar's initrd would download it from the update server on the first boot, which fails without internet; fix: keep oem-release and the marker as the image shipped them (`flatcar-capo oem set %s --id %s` retargets through grub.cfg only), or add the oem-%s sysext of the same Flatcar version", n.why, n.id, r.Image, r.Target, n.id)
	}
}

// hasOEMSysext reports whether /oem/sysext holds oem-<id>-<version>.raw.
func (r *Report) hasOEMSysext(id string) bool {
	return slices.ContainsFunc(r.Sysext, func(e SysextEntry) bool {
		return !e.IsDir && strings.HasPrefix(e.Name, "oem-"+id+"-") && strings.HasSuffix(e.Name, ".raw")
	})
}

// Without /flatcar/first_boot on the ESP, GRUB does not add flatcar.first_boot and Ignition
// does not run.
func ruleFirstBoot(r *Report) {
	if r.FirstBoot != nil && !*r.FirstBoot {
		r.add(levelWarning, "first-boot-missing", "/flatcar/first_boot is missing on the ESP: Ignition will not run on the first boot of this image")
	}
}

// An EFI system partition that cannot be read (corrupt, crafted) will not boot under UEFI.
func ruleESPUnreadable(r *Report) {
	if r.ESPError != "" {
		r.add(levelWarning, "esp-unreadable", "the EFI system partition cannot be read (%s): UEFI firmware may not boot this image and /flatcar/first_boot cannot be checked; start again from a release image", r.ESPError)
	}
}

func ruleAutologin(r *Report) {
	if strings.Contains(" "+r.OEM.Settings.LinuxAppend+" ", " "+oem.Autologin+" ") {
		r.add(levelWarning, "autologin", "linux_append contains flatcar.autologin: a root shell on the serial/VNC console; fix: flatcar-capo oem set %s --id %s", r.Image, r.Target)
	}
}

func ruleHybridMBR(r *Report) {
	if r.MBR.Kind == disk.MBRHybrid {
		r.add(levelWarning, "hybrid-mbr", "the image has a hybrid MBR (Flatcar LTS 4081 and releases before 4459.2.0): Glance 2026.2 refuses it by default and newer Nova rejects it (Launchpad bug 2091114); fix: flatcar-capo oem set %s --id %s --protective-mbr", r.Image, r.Target)
	}
}

// The partition table read fine only from the backup header at the end of the image: firmware
// and GRUB read the primary one first.
func ruleGPTFromBackup(r *Report) {
	if r.GPTPrimary != "" {
		r.add(levelWarning, "gpt-primary-damaged", "the primary GPT header is damaged (%s); the partitions were read from the backup header at the end of the image, which firmware may not do; rebuild from a fresh release image, or restore the primary with gdisk's recovery menu (r, then c: load the backup) — not 'sgdisk -e', which starts an empty table", r.GPTPrimary)
	}
}

// emptyOEMSysexts are the OEM sysexts that hold only their extension-release: everything
// qemu- or OpenStack-specific keys on flatcar.oem.id.
var emptyOEMSysexts = map[string]bool{"qemu": true, "openstack": true}

// A retargeted image keeps its oem-release and the OEM sysext it names. For qemu (and
// openstack) that sysext is empty, so this is info; another platform's sysext carries that
// platform's agents, worth a warning. A missing sysext is ruleOEMSysextMissing's error.
func ruleOEMReleaseDiffers(r *Report) {
	s := r.OEM.Settings
	id := r.OEM.OEMReleaseID
	switch {
	case id == "" || id == s.OEMID:
	case emptyOEMSysexts[id]:
		r.add(levelInfo, "oem-release-differs", "oem-release says ID=%s while oem_id is %s: expected after retargeting a %s image; its oem-%s sysext stays merged and is empty, so this is harmless (changing oem-release would make the initrd download another sysext at boot)", id, s.OEMID, id, id)
	default:
		r.add(levelWarning, "oem-release-differs", "oem-release says ID=%s while oem_id is %s: the oem-%s sysext stays merged and brings %s's agents to a %s machine; start from Flatcar's %s image instead", id, s.OEMID, id, id, s.OEMID, s.OEMID)
	}
}

// A marker naming neither oem_id nor oem-release's ID is a state no Flatcar image ships.
func ruleMarkerDiffers(r *Report) {
	for _, m := range r.Markers {
		if id := strings.TrimPrefix(m, markerPrefix); id != r.OEM.Settings.OEMID && id != r.OEM.OEMReleaseID {
			r.add(levelWarning, "sysext-differs", "sysext marker %s differs from oem_id %s and from oem-release's ID=%s", m, r.OEM.Settings.OEMID, r.OEM.OEMReleaseID)
		}
	}
}
