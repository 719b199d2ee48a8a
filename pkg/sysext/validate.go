package sysext

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultName is the NAME a file would be linked as when nobody says: its file name without
// .raw, or, for a versioned file such as kubernetes-v1.33.4-x86-64.raw, the NAME of its
// extension-release when the file name starts with NAME- (the bakery's convention: the
// versioned file is linked as /etc/extensions/kubernetes.raw).
func (info *Info) DefaultName() string {
	base := strings.TrimSuffix(filepath.Base(info.Path), ".raw")
	if _, ok := info.Releases[base]; ok {
		return base
	}
	for _, n := range info.ReleaseNames {
		if strings.HasPrefix(base, n+"-") {
			return n
		}
	}
	return base
}

// Problems lists why systemd-sysext would refuse the image when it is linked as
// /etc/extensions/NAME.raw, each with the fix; empty means none of these checks failed.
func (info *Info) Problems(name string) []string {
	var p []string
	if err := validName(name); err != nil {
		p = append(p, err.Error())
	}
	if sectors := info.Size &^ 511; info.BytesUsed > sectors {
		p = append(p, fmt.Sprintf("the file is %d bytes, not padded to 4 KiB: the loop device systemd-sysext mounts it on ends at %d, before the image's end at %d, and the kernel refuses it (pad it: truncate -s %%4096 FILE; mksquashfs pads by default)", info.Size, sectors, info.BytesUsed))
	}
	if info.HasOSRelease {
		p = append(p, "it ships usr/lib/os-release, which systemd-sysext refuses in an extension (remove it; the extension's identity belongs in "+ReleasePath(name)+")")
	}
	_, ok := info.Releases[name]
	switch {
	case ok:
	case info.ReleaseErrors[name] != "":
		p = append(p, fmt.Sprintf("%s does not parse: %s", ReleasePath(name), info.ReleaseErrors[name]))
	case len(info.ReleaseNames) == 0:
		p = append(p, fmt.Sprintf("it has no usr/lib/extension-release.d/extension-release.* file, so systemd-sysext ignores it (add %s with ID=_any and ARCHITECTURE=, or rebuild it with 'flatcar-capo sysext create')", ReleasePath(name)))
	default:
		p = append(p, fmt.Sprintf("linked as %s.raw it needs %s, but it carries %s: systemd-sysext matches the file name in /etc/extensions, not the one in the image (link it as %s.raw, or rebuild it with NAME %s)",
			name, ReleasePath(name), "extension-release."+strings.Join(info.ReleaseNames, ", extension-release."), info.ReleaseNames[0], name))
	}
	return p
}

// Validate returns an error listing Problems(name), or nil.
func (info *Info) Validate(name string) error {
	if p := info.Problems(name); len(p) > 0 {
		return fmt.Errorf("%s is not a usable sysext: %s", info.Path, strings.Join(p, "; "))
	}
	return nil
}

// WouldMerge says whether systemd-sysext on host would merge the image linked as
// /etc/extensions/NAME.raw, and why or why not.
func (info *Info) WouldMerge(name string, host Host) (bool, string) {
	if p := info.Problems(name); len(p) > 0 {
		return false, p[0]
	}
	return compatible(info.Releases[name], host)
}

// Ignored lists the top-level directories systemd-sysext does not merge (anything but usr
// and opt); their content is dead weight, not an error.
func (info *Info) Ignored() []string {
	var out []string
	for _, e := range info.Files {
		if !strings.Contains(e.Path, "/") && e.Path != "usr" && e.Path != "opt" {
			out = append(out, "/"+e.Path)
		}
	}
	return out
}

// NotRootOwned lists entries not owned by root:root; systemd-sysext merges them anyway, but
// a binary in /usr owned by another user can be replaced by that user.
func (info *Info) NotRootOwned() []string {
	var out []string
	for _, e := range info.Files {
		if e.UID != 0 || e.GID != 0 {
			out = append(out, fmt.Sprintf("/%s (%d:%d)", e.Path, e.UID, e.GID))
		}
	}
	return out
}

// Check is what a build runs on every sysext before putting it into an image: Open, the
// checks for NAME, the merge rules against host, and a read of all file data.
func Check(path, name string, host Host) (*Info, error) {
	info, err := Open(path)
	if err != nil {
		return nil, err
	}
	if err := info.Validate(name); err != nil {
		return nil, err
	}
	if ok, why := info.WouldMerge(name, host); !ok {
		return nil, fmt.Errorf("%s would not be merged by %s: %s", path, host.Source, why)
	}
	if err := info.Verify(); err != nil {
		return nil, err
	}
	return info, nil
}
