package packer

import (
	"fmt"
	"regexp"
	"strconv"
)

// version is a packer release as `packer version` reports it.
type version struct {
	Major, Minor, Patch int
	Suffix              string // "-dev" and the like; empty for releases
}

func (v version) String() string {
	return fmt.Sprintf("%d.%d.%d%s", v.Major, v.Minor, v.Patch, v.Suffix)
}

// AtLeast reports whether v is major.minor or later.
func (v version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// NeedsQEMUPlugin: packer 1.10 dropped the bundled QEMU builder; from then on the plugin must be
// installed, and the template declares it in required_plugins. 1.7-1.9 understand
// required_plugins too, but still bundle QEMU, and declaring it there would demand `packer init`.
func (v version) NeedsQEMUPlugin() bool { return v.AtLeast(1, 10) }

// Supported: 1.6.0 introduced iso_checksum = "none", which the template uses for the local base disk.
func (v version) Supported() error {
	if !v.AtLeast(1, 6) {
		return fmt.Errorf("packer %s is too old: flatcar-capo needs packer 1.6 or later (Debian 12's 1.6.6 works; scripts/install-packer.sh builds 1.12.0 with the QEMU plugin)", v)
	}
	return nil
}

var (
	versionLine = regexp.MustCompile(`(?m)^\s*Packer v(\d+)\.(\d+)\.(\d+)(\S*)`)
	bareVersion = regexp.MustCompile(`^\s*v?(\d+)\.(\d+)\.(\d+)(\S*)\s*$`)
)

// parseVersion reads the output of `packer version` ("Packer v1.12.0", possibly followed by an
// out-of-date notice) or of `packer -v` ("1.6.6").
func parseVersion(out string) (version, error) {
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		m = bareVersion.FindStringSubmatch(out)
	}
	if m == nil {
		return version{}, fmt.Errorf("cannot read a packer version from %q", truncate(out, 200))
	}
	var v version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3])
	v.Suffix = m[4]
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
