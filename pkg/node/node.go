// Package node is the one definition of what flatcar-capo installs on a node: the places (Flatcar's
// /usr is read-only, so binaries go to /opt), the units and drop-ins, and the update masks. The
// sysext bake (pkg/rootfs, pkg/sysext) uses it in Go, the Packer scripts get it as environment
// variables (Env), and a test holds the scripts, the sysext units and the CAPO templates to it.
package node

import (
	"path"
	"strings"
)

// Directories and files of the node, absolute paths.
const (
	BinDir    = "/opt/bin"     // packer method: kubeadm, kubelet, kubectl, crictl
	CNIBinDir = "/opt/cni/bin" // CNI plugins (the sysext's kubelet.service copies them here)
	UnitDir   = "/etc/systemd/system"

	// ExtensionsStore holds the baked sysext images (storage only, not a search path);
	// ExtensionsDir is where systemd-sysext looks (Flatcar's sysext-bakery, CAPO).
	ExtensionsStore = "/opt/extensions"
	ExtensionsDir   = "/etc/extensions"
	// ExtensionsVarDir is systemd-sysext's other search path on ROOT (flatcar-capo puts nothing there).
	ExtensionsVarDir = "/var/lib/extensions"

	// The packer method's kubelet (kubernetes/release's unit with /opt/bin) and kubeadm's drop-in.
	kubeletUnit   = UnitDir + "/" + Kubelet
	kubeletDropIn = UnitDir + "/" + Kubelet + ".d/10-kubeadm.conf"

	// containerd with the systemd cgroup driver (packer method): the config and the drop-in
	// that points Flatcar's containerd.service at it.
	containerdConfig = "/etc/containerd/config.toml"
	containerdDropIn = UnitDir + "/" + Containerd + ".d/10-flatcar-capo.conf"

	// KubeadmDropIn orders kubeadm.service (which the node's Ignition brings) after containerd and
	// coreos-metadata: the sysext bake writes it, the CAPO templates carry the same one.
	KubeadmDropIn = UnitDir + "/" + Kubeadm + ".d/10-flatcar.conf"
	// KubeadmRetryDir holds /etc/kubernetes as Ignition wrote it until kubeadm succeeded: the
	// drop-in puts it back after resetting a failed kubeadm.
	KubeadmRetryDir = "/var/lib/flatcar-capo/kubeadm-retry"
	// kubeadmContainerdDropIn is the packer method's: after containerd only (image-builder #939).
	kubeadmContainerdDropIn = UnitDir + "/" + Kubeadm + ".d/10-flatcar-capo-containerd.conf"

	// ServicePathConf puts BinDir on every unit's PATH (packer method): CABPK's /etc/kubeadm.sh
	// calls plain `kubeadm`, and kubeadm calls crictl. A manager setting, not an environment
	// generator: Flatcar 4628+ mounts /etc noexec.
	ServicePathConf = "/etc/systemd/system.conf.d/10-flatcar-capo-path.conf"
	// servicePath is systemd's default PATH for units with BinDir last (the OS's own tools win).
	servicePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + BinDir

	// VolumePluginDir is the kubelet's flex-volume directory (its default is under /usr).
	VolumePluginDir = "/opt/libexec/kubernetes/kubelet-plugins/volume/exec/"
)

// The preloaded container images and containerd's registry, trust and proxy settings
// (pkg/images writes them; /etc and /var are on ROOT on Flatcar, /etc the upper layer of its overlay).
const (
	PreloadDir     = "/var/lib/flatcar-capo/images" // the archive until first boot, and its lists
	ImagesArchive  = PreloadDir + "/images.tar"     // removed once imported
	ImagesList     = PreloadDir + "/images.json"    // what inspect reads
	ImagesNames    = PreloadDir + "/names"          // what the import script pins
	ImportScript   = "/opt/flatcar-capo/bin/import-images"
	ImportUnitName = "flatcar-capo-import-images.service"
	ImportUnit     = UnitDir + "/" + ImportUnitName
	ImportWants    = UnitDir + "/multi-user.target.wants/" + ImportUnitName

	ContainerdConfDir    = "/etc/containerd/conf.d" // Flatcar's config.toml imports conf.d/*.toml
	ContainerdConfDropIn = ContainerdConfDir + "/10-flatcar-capo.toml"
	ContainerdAuthDropIn = ContainerdConfDir + "/20-flatcar-capo-auth.toml" // --node-registry-auth: root-only
	ContainerdCertsDir   = "/etc/containerd/certs.d"                        // the CRI's registry config_path
	RegistryCA           = "/etc/ssl/certs/flatcar-capo-registry-ca.pem"    // Flatcar rehashes /etc/ssl/certs at boot
	ProxyEnvFile         = "/etc/flatcar-capo/proxy.env"                    // root-only: a proxy URL may carry a password
)

// Hardening and Flatcar's official extensions (build writes them, both methods; inspect reads them).
const (
	// USBStorageConf turns USB storage off (image-builder's disable_flatcar_usb does the same on
	// Flatcar): modprobe runs /bin/false instead of loading the module, and udev's alias loads
	// are blacklisted. build --keep-usb-storage leaves it out.
	USBStorageConf = "/etc/modprobe.d/flatcar-capo-usb-storage.conf"
	// EnabledSysextConf lists Flatcar's official extensions (zfs, podman, nvidia-drivers-...) by
	// name, one a line: Flatcar's initrd downloads and enables them.
	EnabledSysextConf = "/etc/flatcar/enabled-sysext.conf"
	// ReleaseFileServerArg is the kernel argument that points the official extensions' downloads
	// at a mirror of Flatcar's release server (set in the OEM grub.cfg's linux_append).
	ReleaseFileServerArg = "flatcar.release_file_server_url"
)

// USBStorageOff is USBStorageConf's content.
const USBStorageOff = "# flatcar-capo: USB storage off (build --keep-usb-storage keeps it)\ninstall usb-storage /bin/false\nblacklist usb-storage\n"

// ImagesDropIn orders unit after the import unit; ProxyDropIn gives unit the proxy environment.
func ImagesDropIn(unit string) string { return UnitDir + "/" + unit + ".d/05-flatcar-capo-images.conf" }
func ProxyDropIn(unit string) string  { return UnitDir + "/" + unit + ".d/10-flatcar-capo-proxy.conf" }

// RegistryHosts and RegistryHostsCA are the hosts.toml and ca.crt of dir, a registry's
// directory under ContainerdCertsDir (host[:port], or _default for every registry).
func RegistryHosts(dir string) string   { return path.Join(ContainerdCertsDir, dir, "hosts.toml") }
func RegistryHostsCA(dir string) string { return path.Join(ContainerdCertsDir, dir, "ca.crt") }

// InRoot is the node path p as a path in the ROOT filesystem, without the leading slash (what
// pkg/images' files and the sysext bake's entries carry).
func InRoot(p string) string { return strings.TrimPrefix(p, "/") }

// The Kubernetes sysext's layout (Flatcar's sysext-bakery): merged into /usr on the node.
const (
	SysextBinDir        = "/usr/bin"
	SysextCNIDir        = "/usr/local/bin/cni" // copied to CNIBinDir by its kubelet.service
	SysextUnitDir       = "/usr/lib/systemd/system"
	SysextKubeletUnit   = SysextUnitDir + "/" + Kubelet
	SysextKubeletDropIn = SysextUnitDir + "/" + Kubelet + ".d/10-kubeadm.conf"
	// SysextUpholds starts kubelet with multi-user.target (a sysext cannot enable units in /etc).
	SysextUpholds = SysextUnitDir + "/multi-user.target.d/10-kubelet-service.conf"
)

// Units.
const (
	Kubelet    = "kubelet.service"
	Kubeadm    = "kubeadm.service"
	Containerd = "containerd.service"
)

// KubeadmDropInContent is CAPO's flatcar-sysext drop-in: kubeadm runs after containerd and
// coreos-metadata and reads the metadata environment (COREOS_OPENSTACK_*). It also runs a failed
// kubeadm again: kubeadm join gives up on one API answer slower than 10 s (the node proof's worker
// did, beside a loaded control plane), and CABPK's unit is a oneshot that would leave the node
// unjoined until a MachineHealthCheck replaced it. A retry of an init that got as far as etcd
// resumes on its state (the CAPO loop's control plane failed in the CoreDNS addon after CAPI had
// put the worker's join token in that etcd: a reset wiped it, and the worker never joined). Any
// other retry first undoes what the failed kubeadm wrote, keeping the cluster CA and keys
// CABPK's Ignition wrote: kubeadm reset deletes them, and a new CA would not be the cluster's.
// No $ or %: clusterctl's envsubst and systemd would expand them.
const KubeadmDropInContent = `[Unit]
Requires=containerd.service coreos-metadata.service
After=containerd.service coreos-metadata.service
# kubeadm gives up on one slow API answer (10 s): up to 10 tries, 30 s apart.
StartLimitIntervalSec=1h
StartLimitBurst=10

[Service]
EnvironmentFile=/run/metadata/flatcar
Restart=on-failure
RestartSec=30
# A kubeadm that failed after writing its files fails every retry in preflight. A retry of an
# init whose etcd started runs kubeadm init again on what it made, preflight errors ignored
# (its phases are idempotent; kubeadm refuses "all" beside named checks, so a user's list goes):
# that etcd may already hold what CAPI made in the cluster, e.g.
# the workers' join tokens. Any other retry first runs kubeadm reset and puts back
# /etc/kubernetes as Ignition wrote it (the cluster CA and keys); the kubelet config goes
# first, so a kubelet restarted during the reset cannot start old pods.
ExecStartPre=/bin/sh -ec 'umask 077; \
  if [ ! -e /var/lib/flatcar-capo/kubeadm-retry/before ]; then \
    rm -rf /var/lib/flatcar-capo/kubeadm-retry; \
    mkdir -p /var/lib/flatcar-capo/kubeadm-retry/new; \
    if [ -d /etc/kubernetes ]; then cp -a /etc/kubernetes /var/lib/flatcar-capo/kubeadm-retry/new/; fi; \
    mv /var/lib/flatcar-capo/kubeadm-retry/new /var/lib/flatcar-capo/kubeadm-retry/before; \
  elif [ -e /run/cluster-api/bootstrap-success.complete ]; then \
    true; \
  elif grep -q "^kind: InitConfiguration" /etc/kubeadm.yml && [ -d /var/lib/etcd/member ]; then \
    echo kubeadm.service: a retry of an init whose etcd started, so kubeadm init again with preflight errors ignored, no reset; \
    if [ ! -e /var/lib/flatcar-capo/kubeadm-retry/resumed ]; then \
      echo "  - all" > /var/lib/flatcar-capo/kubeadm-retry/ignore; \
      if grep -q "^  ignorePreflightErrors:" /etc/kubeadm.yml; then \
        sed -i "/^  ignorePreflightErrors:/,/^  [a-zA-Z]/ { /^  - /d }" /etc/kubeadm.yml; \
        sed -i "/^  ignorePreflightErrors:/r /var/lib/flatcar-capo/kubeadm-retry/ignore" /etc/kubeadm.yml; \
      else \
        echo "  ignorePreflightErrors:" | cat - /var/lib/flatcar-capo/kubeadm-retry/ignore > /var/lib/flatcar-capo/kubeadm-retry/list; \
        sed -i "/^nodeRegistration:/r /var/lib/flatcar-capo/kubeadm-retry/list" /etc/kubeadm.yml; \
      fi; \
      touch /var/lib/flatcar-capo/kubeadm-retry/resumed; \
    fi; \
  else \
    echo kubeadm.service: a retry, so kubeadm reset and /etc/kubernetes as Ignition wrote it; \
    rm -f /var/lib/kubelet/config.yaml; \
    kubeadm reset -f; \
    if [ -d /var/lib/flatcar-capo/kubeadm-retry/before/kubernetes ]; then cp -a /var/lib/flatcar-capo/kubeadm-retry/before/kubernetes /etc/; fi; \
  fi'
# The copy holds the cluster CA's key: not kept once kubeadm succeeded.
ExecStartPost=/bin/rm -rf /var/lib/flatcar-capo/kubeadm-retry
`

// sysupdateTimer is masked by every CAPO flavor's additionalConfig (enabled with manifests
// --sysupdate-url): Flatcar 4515+ enables it, and its service fails with no transfer.
const sysupdateTimer = "systemd-sysupdate.timer"

// UpdateUnits are masked unless updates are kept: update-engine and locksmithd must not reboot
// a node into another Flatcar behind the cluster's back (image-builder and CAPO mask them too).
var UpdateUnits = []string{"update-engine.service", "locksmithd.service"}

// ExtensionLink is where systemd-sysext finds the sysext NAME (its extension-release.NAME must
// match), and ExtensionFile where the bake stores its image.
func ExtensionLink(name string) string           { return path.Join(ExtensionsDir, name+".raw") }
func ExtensionFile(name, fileName string) string { return path.Join(ExtensionsStore, name, fileName) }

// Env is what the Packer scripts know of this definition (they repeat none of it).
func Env() map[string]string {
	return map[string]string{
		"NODE_BIN_DIR":           BinDir,
		"NODE_EXTENSIONS_STORE":  ExtensionsStore,
		"NODE_EXTENSIONS_DIR":    ExtensionsDir,
		"NODE_CNI_BIN_DIR":       CNIBinDir,
		"NODE_KUBELET_UNIT":      kubeletUnit,
		"NODE_KUBELET_DROPIN":    kubeletDropIn,
		"NODE_CONTAINERD_CONFIG": containerdConfig,
		"NODE_CONTAINERD_DROPIN": containerdDropIn,
		"NODE_KUBEADM_DROPIN":    kubeadmContainerdDropIn,
		"NODE_UPDATE_UNITS":      strings.Join(UpdateUnits, " "),
		"NODE_VOLUME_PLUGIN_DIR": VolumePluginDir,
		"NODE_SERVICE_PATH_CONF": ServicePathConf,
		"NODE_SERVICE_PATH":      servicePath,
	}
}
