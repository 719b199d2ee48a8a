package inspect

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Extensions is what systemd-sysext finds in ROOT at boot: the images in its search paths
// (/etc/extensions, /var/lib/extensions) and the stored ones under /opt/extensions.
type Extensions struct {
	// Root is "ext4" when ROOT was read, "missing" without a ROOT partition, else why not.
	Root string `json:"root"`
	// Host is what "would merge" was judged against; its Source says whether the image's own
	// os-release (on USR-A) or Flatcar's constants.
	Host   sysext.Host       `json:"host"`
	Links  []ExtensionLink   `json:"links"`
	Stored []StoredExtension `json:"stored"`
	// Containerd is which containerd the node runs: "built-in" (Flatcar's containerd-flatcar),
	// the version of a containerd sysext that replaces it, or "none" (masked, nothing instead).
	Containerd string `json:"containerd"`
}

// ExtensionLink is one entry NAME.raw of a search path.
type ExtensionLink struct {
	Path     string `json:"path"`     // /etc/extensions/kubernetes.raw
	Name     string `json:"name"`     // kubernetes: extension-release.NAME must match
	Kind     string `json:"kind"`     // symlink, file, directory, or masked (a link to /dev/null)
	Target   string `json:"target"`   // the symlink's target as written ("" for a file)
	Resolved string `json:"resolved"` // the image file it leads to ("" when dangling)
	Size     int64  `json:"size"`
	// Checked is false when the image was not judged (a directory, or a target on /usr,
	// which Flatcar itself ships); WouldMerge is then false and Reason says why.
	Checked          bool              `json:"checked"`
	ExtensionRelease map[string]string `json:"extensionRelease"`
	WouldMerge       bool              `json:"wouldMerge"`
	Reason           string            `json:"reason"`
	problem          string            // finding code when it would not merge
}

// StoredExtension is an image file under /opt/extensions (storage, not a search path).
type StoredExtension struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Linked bool   `json:"linked"` // a search-path entry leads to it
}

// searchPaths are systemd-sysext's search paths that live on ROOT (/run is a tmpfs).
var searchPaths = []string{node.ExtensionsDir, node.ExtensionsVarDir}

// readExtensions fills r.Extensions from the ROOT partition and judges every search-path entry
// against the image's own os-release (USR-A) or, failing that, Flatcar's constants. It returns
// ROOT's filesystem for the other readers of ROOT, nil when it cannot be read.
func (r *Report) readExtensions(img *disk.Image, parts []disk.Partition, esp *disk.FS) *disk.FS {
	x := &r.Extensions
	x.Host = imageHost(img, parts, esp)
	root, ok := disk.Find(parts, "ROOT")
	if !ok {
		x.Root = "missing"
		return nil
	}
	fsys, err := openExt4(img, root)
	if err != nil {
		x.Root = err.Error()
		return nil
	}
	x.Root = "ext4"
	for _, dir := range searchPaths {
		ents, err := readDir(fsys, dir)
		if err != nil {
			continue // no such search path
		}
		for _, e := range ents {
			name, isRaw := strings.CutSuffix(e.name, ".raw")
			if !isRaw && e.kind != "directory" {
				continue // systemd-sysext ignores other files
			}
			x.Links = append(x.Links, judgeLink(fsys, path.Join(dir, e.name), name, e.kind, x.Host))
		}
	}
	x.Stored = storedExtensions(fsys, x.Links)
	x.Containerd = containerdOf(x.Links)
	return fsys
}

// containerdOf says which containerd the node runs: a containerd sysext that merges, with its
// SYSEXT_VERSION_ID, when Flatcar's containerd-flatcar is masked; else Flatcar's own.
func containerdOf(links []ExtensionLink) string {
	masked, ours := false, ""
	for _, l := range links {
		switch {
		case l.Name == sysext.FlatcarContainerdName && l.Kind == "masked":
			masked = true
		case l.Name == sysext.ContainerdName && l.WouldMerge:
			ours = cmpOr(l.ExtensionRelease[sysext.ContainerdVersionKey], "unknown version") + " (" + l.Resolved + ")"
		}
	}
	switch {
	case masked && ours != "":
		return ours
	case masked:
		return "none"
	case ours != "":
		return "built-in (containerd-flatcar is not masked, so both sysexts carry /usr/bin/containerd): " + ours + " is not reliably the one that runs"
	}
	return "built-in"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func judgeLink(fsys *disk.FS, p, name, kind string, host sysext.Host) ExtensionLink {
	l := ExtensionLink{Path: p, Name: name, Kind: kind, ExtensionRelease: map[string]string{}}
	if kind == "directory" {
		l.Reason = "a directory extension; not checked"
		return l
	}
	resolved := p
	if kind == "symlink" {
		if t, err := fsys.ReadLink(disk.FSName(p)); err == nil && t == "/dev/null" {
			l.Target, l.Kind, l.Reason = t, "masked", "masked (a link to /dev/null): systemd-sysext merges no "+name
			return l
		}
		target, final, err := resolveLink(fsys, p)
		l.Target = target
		switch {
		case err != nil:
			l.Checked, l.problem = true, "sysext-link-dangling"
			l.Reason = err.Error()
			return l
		case strings.HasPrefix(final, "/usr/"):
			l.Resolved = final
			l.Reason = "the target is on /usr (USR-A, shipped with Flatcar); not checked"
			return l
		}
		resolved = final
	}
	l.Resolved, l.Checked = resolved, true
	if kind, err := entryKind(fsys, resolved); err != nil || kind != "file" {
		l.problem, l.Reason = "sysext-link-dangling", resolved+" is not a regular file in ROOT"
		return l
	}
	ra, size, err := fsys.ReaderAt(disk.FSName(resolved))
	if err != nil {
		l.problem, l.Reason = "sysext-link-dangling", fmt.Sprintf("%s cannot be opened: %v", resolved, err)
		return l
	}
	l.Size = size
	info, err := sysext.Read(ra, size, resolved)
	if err != nil {
		l.problem, l.Reason = "sysext-incompatible", err.Error()
		return l
	}
	if rel, ok := info.Releases[name]; ok {
		l.ExtensionRelease = rel
	}
	l.WouldMerge, l.Reason = info.WouldMerge(name, host)
	if !l.WouldMerge {
		l.problem = "sysext-incompatible"
		if len(info.ReleaseNames) > 0 && info.Releases[name] == nil && info.ReleaseErrors[name] == "" {
			l.problem = "sysext-name-mismatch"
		}
	}
	return l
}

// resolveLink follows p's symlink chain inside ROOT (at most 8 hops, as a sanity bound) and
// returns the first target as written and the final absolute path, or why it dangles.
func resolveLink(fsys *disk.FS, p string) (first, final string, err error) {
	cur := p
	for hop := 0; hop < 8; hop++ {
		target, err := fsys.ReadLink(disk.FSName(cur))
		if err != nil {
			return first, "", fmt.Errorf("%s: cannot read the link: %v", cur, err)
		}
		if hop == 0 {
			first = target
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(cur), target)
		}
		target = path.Clean(target)
		if strings.HasPrefix(target, "/usr/") {
			return first, target, nil
		}
		kind, err := entryKind(fsys, target)
		if err != nil {
			return first, "", fmt.Errorf("the link %s -> %s dangles: %s does not exist in ROOT", p, first, target)
		}
		if kind != "symlink" {
			return first, target, nil
		}
		cur = target
	}
	return first, "", fmt.Errorf("the link %s -> %s has more than 8 levels of links", p, first)
}

// storedExtensions lists /opt/extensions/*.raw and /opt/extensions/*/*.raw.
func storedExtensions(fsys *disk.FS, links []ExtensionLink) []StoredExtension {
	out := []StoredExtension{}
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := readDir(fsys, dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := path.Join(dir, e.name)
			switch {
			case e.kind == "directory" && depth < 1:
				walk(p, depth+1)
			case e.kind == "file" && strings.HasSuffix(e.name, ".raw"):
				linked := slices.ContainsFunc(links, func(l ExtensionLink) bool { return l.Resolved == p })
				out = append(out, StoredExtension{Path: p, Size: e.size, Linked: linked})
			}
		}
	}
	walk(node.ExtensionsStore, 0)
	return out
}

type dirEntry struct {
	name, kind string
	size       int64
}

// readDir lists the directory dir (an absolute path), sorted by name.
func readDir(fsys *disk.FS, dir string) ([]dirEntry, error) {
	ents, err := fsys.ReadDir(disk.FSName(dir))
	if err != nil {
		return nil, err
	}
	var out []dirEntry
	for _, e := range ents {
		var size int64
		if fi, err := e.Info(); err == nil {
			size = fi.Size()
		}
		out = append(out, dirEntry{name: e.Name(), kind: kindOf(e.Type()), size: size})
	}
	return out, nil
}

// kindOf names a file type as the report does.
func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t.IsDir():
		return "directory"
	case !t.IsRegular():
		return "other"
	}
	return "file"
}

// entryKind is the kind of the entry p itself (a symlink is not followed).
func entryKind(fsys *disk.FS, p string) (string, error) {
	fi, err := fsys.Lstat(disk.FSName(p))
	if err != nil {
		return "", err
	}
	return kindOf(fi.Mode().Type()), nil
}

// openExt4 opens a partition's ext4 read-only.
func openExt4(img *disk.Image, p disk.Partition) (*disk.FS, error) {
	sec := vdisk.Protect(img.Section(p))
	if kind, _ := disk.DetectFS(sec); kind != "ext4" {
		return nil, fmt.Errorf("not ext4 (no ext4 superblock on partition %d)", p.Number)
	}
	return disk.OpenExt4(sec, disk.PartitionName(p))
}

// imageHost is the image's own os-release from USR-A (/usr/lib/os-release is lib/os-release
// there) when it can be read, else Flatcar's constants; the architecture comes from the ESP's
// removable-media loader name (bootx64.efi / bootaa64.efi).
func imageHost(img *disk.Image, parts []disk.Partition, esp *disk.FS) sysext.Host {
	arch := espArch(esp)
	constants := func(why string) sysext.Host {
		h := sysext.FlatcarHost(arch)
		h.Source += ": " + why
		return h
	}
	usr, ok := disk.Find(parts, "USR-A")
	if !ok {
		return constants("no USR-A partition")
	}
	fsys, err := disk.OpenFS(vdisk.Protect(img.Section(usr)), disk.PartitionName(usr))
	if err != nil {
		return constants("USR-A is not readable (" + err.Error() + ")")
	}
	data, err := fsys.ReadFile("lib/os-release")
	if err != nil {
		return constants("USR-A's /lib/os-release is not readable (" + err.Error() + ")")
	}
	h, err := sysext.HostFromOSRelease(data, arch, "/usr/lib/os-release on USR-A ("+fsys.Type()+")")
	if err != nil {
		return constants(err.Error())
	}
	return h
}

func espArch(esp *disk.FS) string {
	if esp == nil {
		return ""
	}
	for _, dir := range []string{"EFI/boot", "EFI/BOOT", "efi/boot"} {
		ents, err := esp.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			switch strings.ToLower(e.Name()) {
			case "bootx64.efi":
				return "x86-64"
			case "bootaa64.efi":
				return "arm64"
			}
		}
		return ""
	}
	return ""
}

// ruleContainerd: a node whose containerd-flatcar is masked with no containerd sysext instead
// has no containerd (kubelet never starts a pod); ours beside an unmasked one is ambiguous.
func ruleContainerd(r *Report) {
	switch c := r.Extensions.Containerd; {
	case c == "none":
		r.add(levelError, "containerd-missing", "%s links to /dev/null and no containerd sysext would merge: the node has no containerd; fix: bake one (flatcar-capo build --containerd-version) or remove the mask", node.ExtensionLink(sysext.FlatcarContainerdName))
	case strings.HasPrefix(c, "built-in (containerd-flatcar is not masked"):
		r.add(levelWarning, "containerd-ambiguous", "a containerd sysext is linked but %s is not masked: both carry /usr/bin/containerd; fix: link %s to /dev/null (flatcar-capo build --containerd-version does)", node.ExtensionLink(sysext.FlatcarContainerdName), node.ExtensionLink(sysext.FlatcarContainerdName))
	}
}

// Rules: a search-path entry that would not be merged leaves the node without what it carries
// (for Kubernetes: no kubelet, the node never joins).
func ruleSysextLinks(r *Report) {
	for _, l := range r.Extensions.Links {
		switch l.problem {
		case "sysext-link-dangling":
			r.add(levelError, l.problem, "%s: %s; systemd-sysext skips it, so nothing it carries exists on the node; fix: bake the image again (flatcar-capo build --method sysext) or point the link at an existing /opt/extensions/... file", l.Path, l.Reason)
		case "sysext-name-mismatch":
			r.add(levelError, l.problem, "%s: %s", l.Path, l.Reason)
		case "sysext-incompatible":
			r.add(levelError, l.problem, "%s would not be merged (judged against %s): %s", l.Path, r.Extensions.Host.Source, l.Reason)
		}
	}
}
