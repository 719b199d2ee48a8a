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
	SysupdateDir    = "etc/sysupdate.kubernetes.d"                           // systemd-sysupdate transfer configs
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
	// KubernetesVersion and SysupdateURL, when both set, add systemd-sysupdate configs that fetch
	// newer patch releases of the same minor from SysupdateURL (Flatcar's extension server layout).
	KubernetesVersion string
	SysupdateURL      string
}

// Entries returns the added ROOT entries: each sysext and its link, the kubeadm.service drop-in,
// the update masks and the optional sysupdate configs.
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
	if l.SysupdateURL != "" && l.KubernetesVersion != "" {
		conf, err := sysupdateConf(l.KubernetesVersion, l.SysupdateURL)
		if err != nil {
			return nil, err
		}
		entries = append(entries,
			Bytes(SysupdateDir+"/kubernetes.conf", 0o644, conf),
			Bytes(SysupdateDir+"/noop.conf", 0o644, []byte(sysupdateNoop)))
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

// sysupdateConf is the transfer CAPO's flatcar-sysext flavor writes: newer patch releases of the
// same minor, %a being systemd's architecture name.
func sysupdateConf(version, url string) ([]byte, error) {
	if err := sysext.ValidVersion(version); err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return []byte(fmt.Sprintf(`[Transfer]
Verify=false

[Source]
Type=url-file
Path=%s
MatchPattern=kubernetes-v%s.%s.@v-%%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=/opt/extensions/kubernetes
CurrentSymlink=/etc/extensions/kubernetes.raw
`, url, parts[0], parts[1])), nil
}

// sysupdateNoop keeps systemd-sysupdate from touching the OS itself (only the component above).
const sysupdateNoop = `[Source]
Type=regular-file
Path=/
MatchPattern=invalid@v.raw

[Target]
Type=regular-file
Path=/
`
