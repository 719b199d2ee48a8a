// Package rootfs rebuilds the ROOT filesystem (partition 9, ext4, label ROOT) of a Flatcar disk
// image without mounting it and without root: a fresh ext4 is made with go-diskfs in the
// partition's range of a sparse copy, carrying every directory, regular file and symlink of the
// original ROOT (mode, uid/gid, mtime) plus the files a build adds. go-diskfs cannot safely write
// into an existing ext4 (FACTS: extent checksums, htree directories, backup superblocks), but a
// filesystem it created itself, with the features chosen in mkfs.go, stays e2fsck-clean.
package rootfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// Entry is one file, directory or symlink of the new ROOT. Path is relative to the filesystem
// root, slash separated, without a leading slash ("etc/extensions/kubernetes.raw").
type Entry struct {
	Path    string
	Mode    fs.FileMode // type (0, fs.ModeDir or fs.ModeSymlink) and permission bits (setuid/setgid/sticky too)
	UID     uint32
	GID     uint32
	ModTime time.Time
	Target  string // symlink target
	Size    int64  // regular files: the exact number of bytes Open yields
	// Open returns the content of a regular file; it is called once, while the file is written.
	Open func() (io.ReadCloser, error)
}

// IsDir, IsSymlink and IsRegular classify the entry by its mode.
func (e Entry) IsDir() bool     { return e.Mode.IsDir() }
func (e Entry) IsSymlink() bool { return e.Mode&fs.ModeSymlink != 0 }
func (e Entry) IsRegular() bool { return e.Mode.IsRegular() }

// Bytes returns a regular-file entry with the given content.
func Bytes(p string, perm fs.FileMode, content []byte) Entry {
	return Entry{Path: p, Mode: perm, Size: int64(len(content)), Open: func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(content))), nil
	}}
}

// hostFile returns a regular-file entry whose content is the host file src (owned by root in
// the image). The size is taken now; Bake fails if the file changes size before it is written.
func hostFile(p string, perm fs.FileMode, src string) (Entry, error) {
	st, err := os.Stat(src)
	if err != nil {
		return Entry{}, err
	}
	if !st.Mode().IsRegular() {
		return Entry{}, fmt.Errorf("%s is not a regular file", src)
	}
	return Entry{Path: p, Mode: perm, Size: st.Size(), ModTime: st.ModTime(),
		Open: func() (io.ReadCloser, error) { return os.Open(src) }}, nil
}

// Symlink returns a symlink entry.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Mode: fs.ModeSymlink | 0o777, Target: target}
}

// cleanPath validates an entry path: relative, clean, no "." or ".." elements, not the root.
func cleanPath(p string) (string, error) {
	q := strings.TrimPrefix(p, "/")
	if q == "" || q == "." || !fs.ValidPath(q) || path.Clean(q) != q {
		return "", fmt.Errorf("invalid path %q in ROOT: want a clean path such as etc/extensions/kubernetes.raw", p)
	}
	return q, nil
}

// validate checks an added entry before anything is written.
func (e Entry) validate() error {
	switch {
	case e.IsDir():
	case e.IsSymlink():
		if e.Target == "" || strings.ContainsRune(e.Target, 0) {
			return fmt.Errorf("/%s: empty or invalid symlink target", e.Path)
		}
		if len(e.Target) >= 4096 {
			return fmt.Errorf("/%s: symlink target longer than 4095 bytes", e.Path)
		}
	case e.IsRegular():
		if e.Open == nil || e.Size < 0 {
			return fmt.Errorf("/%s: regular file without content", e.Path)
		}
	default:
		return fmt.Errorf("/%s: only directories, regular files and symlinks can be written (mode %v)", e.Path, e.Mode)
	}
	return nil
}

// Extension is one sysext to bake: stored as /opt/extensions/<Name>/<FileName> and linked from
// /etc/extensions/<Name>.raw (absolute link), the name systemd-sysext matches against the
// image's extension-release.<Name>.
type Extension struct {
	Name     string // e.g. kubernetes
	FileName string // e.g. kubernetes-v1.33.4-x86-64.raw
	Source   string // host path of the sysext image
}

// Layout is everything a sysext bake adds to ROOT.
type Layout struct {
	Extensions []Extension
	// Masked are sysexts kept from merging by a link to /dev/null (a containerd sysext masks
	// Flatcar's built-in containerd-flatcar, as the bakery documents).
	Masked      []string
	KeepUpdates bool // do not mask update-engine and locksmithd
}

// Entries returns the added ROOT entries: each sysext and its link, the kubeadm.service drop-in,
// and the update masks.
func (l Layout) Entries() ([]Entry, error) {
	var entries []Entry
	names := map[string]bool{}
	for _, x := range l.Extensions {
		if x.Name == "" || strings.ContainsAny(x.Name, "/ ") || x.FileName == "" || strings.ContainsAny(x.FileName, "/ ") || !strings.HasSuffix(x.FileName, ".raw") {
			return nil, fmt.Errorf("sysext %q as %q: want a NAME and a file name NAME-....raw without slashes", x.Name, x.FileName)
		}
		if names[x.Name] {
			return nil, fmt.Errorf("two sysexts named %q: systemd-sysext merges one image per name", x.Name)
		}
		names[x.Name] = true
		stored := node.ExtensionFile(x.Name, x.FileName)
		raw, err := hostFile(inRoot(stored), 0o644, x.Source)
		if err != nil {
			return nil, fmt.Errorf("sysext %s: %w", x.Name, err)
		}
		entries = append(entries, raw, Symlink(inRoot(node.ExtensionLink(x.Name)), stored))
	}
	for _, m := range l.Masked {
		if m == "" || strings.ContainsAny(m, "/ ") || names[m] {
			return nil, fmt.Errorf("sysext %q cannot be masked (a bad name, or baked too)", m)
		}
		entries = append(entries, Symlink(inRoot(node.ExtensionLink(m)), "/dev/null"))
	}
	entries = append(entries, Bytes(inRoot(node.KubeadmDropIn), 0o644, []byte(node.KubeadmDropInContent)))
	if !l.KeepUpdates {
		for _, u := range node.UpdateUnits {
			entries = append(entries, Symlink(inRoot(path.Join(node.UnitDir, u)), "/dev/null"))
		}
	}
	return entries, nil
}

// inRoot is a node path as an entry of the ROOT filesystem (no leading slash).
func inRoot(p string) string { return strings.TrimPrefix(p, "/") }
