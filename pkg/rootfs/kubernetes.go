package rootfs

import (
	"fmt"
	"strings"
)

// Where Flatcar (sysext-bakery, CAPO's flatcar-sysext flavor) keeps a Kubernetes sysext.
const (
	ExtensionsStore = "opt/extensions/kubernetes"     // storage only, not a search path
	ExtensionLink   = "etc/extensions/kubernetes.raw" // the name systemd-sysext merges
	SysupdateDir    = "etc/sysupdate.kubernetes.d"    // systemd-sysupdate transfer configs
	KubeadmDropIn   = "etc/systemd/system/kubeadm.service.d/10-flatcar.conf"
	systemdUnitDir  = "etc/systemd/system"
	maskTarget      = "/dev/null"
	defaultSysupURL = "https://extensions.flatcar.org/extensions/kubernetes/"
)

// KubeadmDropInContent is CAPO's flatcar-sysext drop-in: kubeadm runs after containerd and
// coreos-metadata and reads the metadata environment (COREOS_OPENSTACK_*).
const KubeadmDropInContent = `[Unit]
Requires=containerd.service coreos-metadata.service
After=containerd.service coreos-metadata.service

[Service]
EnvironmentFile=/run/metadata/flatcar
`

// UpdateUnits are masked unless updates are kept: a baked Kubernetes must not be rebooted into a
// new Flatcar by update-engine/locksmithd behind the cluster's back (image-builder and CAPO do
// the same).
var UpdateUnits = []string{"update-engine.service", "locksmithd.service"}

// Kubernetes describes the files a Kubernetes sysext bake adds to ROOT.
type Kubernetes struct {
	Sysext      string // host path of the sysext image
	Version     string // Kubernetes version with the v, e.g. v1.33.4
	Arch        string // systemd architecture name: x86-64 or arm64
	KeepUpdates bool   // do not mask update-engine and locksmithd
	// SysupdateURL, when set, adds systemd-sysupdate configs that fetch newer patch releases of
	// the same minor version from that URL (Flatcar's extension server layout).
	SysupdateURL string
}

// SysextName is the versioned file name: kubernetes-v1.33.4-x86-64.raw.
func SysextName(version, arch string) string {
	return fmt.Sprintf("kubernetes-%s-%s.raw", version, arch)
}

// Entries returns the added ROOT entries: the sysext in /opt/extensions/kubernetes, the absolute
// link /etc/extensions/kubernetes.raw to it, the kubeadm.service drop-in, the update masks and
// the optional sysupdate configs.
func (k Kubernetes) Entries() ([]Entry, error) {
	if !strings.HasPrefix(k.Version, "v") || strings.ContainsAny(k.Version, "/ ") {
		return nil, fmt.Errorf("kubernetes version %q: want the release tag with its v, e.g. v1.33.4", k.Version)
	}
	if k.Arch != "x86-64" && k.Arch != "arm64" {
		return nil, fmt.Errorf("architecture %q: want systemd's name, x86-64 or arm64", k.Arch)
	}
	stored := ExtensionsStore + "/" + SysextName(k.Version, k.Arch)
	raw, err := HostFile(stored, 0o644, k.Sysext)
	if err != nil {
		return nil, fmt.Errorf("sysext: %w", err)
	}
	raw.ModTime = raw.ModTime.Truncate(0)
	entries := []Entry{
		raw,
		Symlink(ExtensionLink, "/"+stored),
		Bytes(KubeadmDropIn, 0o644, []byte(KubeadmDropInContent)),
	}
	if !k.KeepUpdates {
		for _, u := range UpdateUnits {
			entries = append(entries, Symlink(systemdUnitDir+"/"+u, maskTarget))
		}
	}
	if k.SysupdateURL != "" {
		conf, err := sysupdateConf(k.Version, k.SysupdateURL)
		if err != nil {
			return nil, err
		}
		entries = append(entries,
			Bytes(SysupdateDir+"/kubernetes.conf", 0o644, conf),
			Bytes(SysupdateDir+"/noop.conf", 0o644, []byte(sysupdateNoop)))
	}
	return entries, nil
}

// sysupdateConf is the transfer CAPO's flatcar-sysext flavor writes: newer patch releases of the
// same minor, %a being systemd's architecture name.
func sysupdateConf(version, url string) ([]byte, error) {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("kubernetes version %q has no minor version", version)
	}
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

// DefaultSysupdateURL is Flatcar's public extension server.
const DefaultSysupdateURL = defaultSysupURL
