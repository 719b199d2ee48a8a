package rootfs

import (
	"fmt"
	"path"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// Where the baked files go (Flatcar's sysext-bakery and CAPO's flatcar-sysext flavor).
const (
	ExtensionsStore = "opt/extensions"                                       // storage only, not a search path
	ExtensionsDir   = "etc/extensions"                                       // where systemd-sysext looks
	KubeadmDropIn   = "etc/systemd/system/kubeadm.service.d/10-flatcar.conf" // kubeadm after containerd
	systemdUnitDir  = "etc/systemd/system"
)

// KubeadmDropInContent is CAPO's flatcar-sysext drop-in: kubeadm runs after containerd and
// coreos-metadata and reads the metadata environment (COREOS_OPENSTACK_*).
const KubeadmDropInContent = `[Unit]
Requires=containerd.service coreos-metadata.service
After=containerd.service coreos-metadata.service

[Service]
EnvironmentFile=/run/metadata/flatcar
`

// UpdateUnits are masked unless updates are kept: update-engine and locksmithd must not reboot
// a node into another Flatcar behind the cluster's back (image-builder and CAPO mask them too).
var UpdateUnits = []string{"update-engine.service", "locksmithd.service"}

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
		stored := path.Join(ExtensionsStore, x.Name, x.FileName)
		raw, err := HostFile(stored, 0o644, x.Source)
		if err != nil {
			return nil, fmt.Errorf("sysext %s: %w", x.Name, err)
		}
		entries = append(entries, raw, Symlink(path.Join(ExtensionsDir, x.Name+".raw"), "/"+stored))
	}
	entries = append(entries, Bytes(KubeadmDropIn, 0o644, []byte(KubeadmDropInContent)))
	if !l.KeepUpdates {
		for _, u := range UpdateUnits {
			entries = append(entries, Symlink(path.Join(systemdUnitDir, u), "/dev/null"))
		}
	}
	return entries, nil
}

// KubernetesExtension is the Kubernetes sysext entry with the conventional names.
func KubernetesExtension(source, version, arch string) (Extension, error) {
	name, err := sysext.KubernetesFileName(version, arch)
	if err != nil {
		return Extension{}, err
	}
	return Extension{Name: sysext.KubernetesName, FileName: name, Source: source}, nil
}
