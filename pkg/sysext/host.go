package sysext

import (
	"fmt"
	"slices"
	"strings"
)

// Host is what systemd-sysext compares an extension-release with: the host's os-release
// and architecture. Source says where the values came from, for reports.
type Host struct {
	ID           string `json:"id"`
	VersionID    string `json:"versionId"`
	SysextLevel  string `json:"sysextLevel"`
	Architecture string `json:"architecture"` // systemd's name; empty: not checked
	Source       string `json:"source"`
	// versionUnknown: the host has a VERSION_ID that we do not know (Flatcar's constants).
	versionUnknown bool
}

// Flatcar's os-release constants: every Flatcar release since sysexts exist says
// ID=flatcar and SYSEXT_LEVEL=1.0.
const (
	flatcarID          = "flatcar"
	flatcarSysextLevel = "1.0"
)

// FlatcarHost is a Flatcar host of the given architecture (any spelling; empty: not checked)
// described by Flatcar's constants, for when the image's own os-release cannot be read.
func FlatcarHost(arch string) Host {
	return Host{ID: flatcarID, SysextLevel: flatcarSysextLevel, Architecture: hostArch(arch),
		Source: "Flatcar's constants (ID=flatcar, SYSEXT_LEVEL=1.0)", versionUnknown: true}
}

// HostFromOSRelease describes a host by its os-release content; source names the file.
func HostFromOSRelease(data []byte, arch, source string) (Host, error) {
	r, err := parseRelease(data)
	if err != nil {
		return Host{}, fmt.Errorf("%s: %w", source, err)
	}
	if r["ID"] == "" {
		return Host{}, fmt.Errorf("%s has no ID=", source)
	}
	return Host{ID: r["ID"], VersionID: r["VERSION_ID"], SysextLevel: r["SYSEXT_LEVEL"], Architecture: hostArch(arch), Source: source}, nil
}

// hostArch is systemd's name for a host architecture given in any spelling; "" (not checked)
// when it is empty or unknown.
func hostArch(arch string) string {
	if arch == "" {
		return ""
	}
	a, _ := Arch(arch)
	return a
}

// compatible applies systemd-sysext's rules (extension_release_validate in systemd's
// src/shared/extension-util.c) to an extension-release: SYSEXT_SCOPE, ARCHITECTURE, then ID
// (_any matches every OS), then SYSEXT_LEVEL when both sides have one, else VERSION_ID.
// It returns whether systemd would merge, and why (or why not) in one sentence.
func compatible(ext Release, h Host) (bool, string) {
	if len(ext) == 0 {
		return false, "the extension-release file is empty"
	}
	if scope, ok := ext["SYSEXT_SCOPE"]; ok && scope != "" && !slices.Contains(strings.Fields(scope), "system") {
		return false, fmt.Sprintf("SYSEXT_SCOPE=%q does not include \"system\" (systemd-sysext merges only system-scoped images at boot)", scope)
	}
	arch := ext["ARCHITECTURE"]
	archNote := "no ARCHITECTURE (any)"
	switch {
	case arch == "" || arch == "_any":
		if arch == "_any" {
			archNote = "ARCHITECTURE=_any"
		}
	case !isSystemdArch(arch):
		return false, fmt.Sprintf("ARCHITECTURE=%s is not a systemd architecture name and never matches (use x86-64 or arm64, not amd64/aarch64)", arch)
	case h.Architecture != "" && arch != h.Architecture:
		return false, fmt.Sprintf("ARCHITECTURE=%s, but the host is %s", arch, h.Architecture)
	default:
		archNote = "ARCHITECTURE=" + arch
		if h.Architecture == "" {
			archNote += " (host architecture not checked)"
		}
	}
	id := ext["ID"]
	switch {
	case id == "":
		return false, "extension-release has no ID= (use ID=_any, or ID=flatcar with SYSEXT_LEVEL=1.0)"
	case id == "_any":
		return true, fmt.Sprintf("ID=_any matches any OS; %s", archNote)
	case id != h.ID:
		return false, fmt.Sprintf("ID=%s, but the host is ID=%s (use ID=_any or ID=%s)", id, h.ID, h.ID)
	}
	if h.VersionID == "" && h.SysextLevel == "" {
		return true, fmt.Sprintf("ID=%s matches and the host has no version to compare; %s", id, archNote)
	}
	level := ext["SYSEXT_LEVEL"]
	if h.SysextLevel != "" && level != "" {
		if level != h.SysextLevel {
			return false, fmt.Sprintf("SYSEXT_LEVEL=%s, but the host has SYSEXT_LEVEL=%s", level, h.SysextLevel)
		}
		return true, fmt.Sprintf("ID=%s and SYSEXT_LEVEL=%s match the host; %s", id, level, archNote)
	}
	if h.VersionID == "" {
		if h.versionUnknown {
			return false, fmt.Sprintf("ID=%s without SYSEXT_LEVEL merges only on the Flatcar version named by its VERSION_ID, and the host's version is unknown (add SYSEXT_LEVEL=%s)", id, h.SysextLevel)
		}
		return true, fmt.Sprintf("ID=%s matches and the host has no VERSION_ID to compare; %s", id, archNote)
	}
	v := ext["VERSION_ID"]
	switch {
	case v == "":
		return false, fmt.Sprintf("ID=%s matches, but the extension has neither SYSEXT_LEVEL nor VERSION_ID to compare with the host's VERSION_ID=%s", id, h.VersionID)
	case v != h.VersionID:
		return false, fmt.Sprintf("VERSION_ID=%s, but the host has VERSION_ID=%s", v, h.VersionID)
	}
	return true, fmt.Sprintf("ID=%s and VERSION_ID=%s match the host; %s", id, v, archNote)
}
