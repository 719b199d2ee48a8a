package rootfs

import (
	"fmt"
	"path"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

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
	Extensions  []Extension
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
		raw, err := HostFile(inRoot(stored), 0o644, x.Source)
		if err != nil {
			return nil, fmt.Errorf("sysext %s: %w", x.Name, err)
		}
		entries = append(entries, raw, Symlink(inRoot(node.ExtensionLink(x.Name)), stored))
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
