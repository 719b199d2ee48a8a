// Package standin builds and boots a Flatcar-like systemd guest for tests, the demo and
// benchmarks: Debian bookworm packages (mmdebstrap) laid out as Flatcar is, on the disk of
// internal/testing/flatcardisk. USR-A holds /usr (ext4, mounted read-only), ROOT (ext4, label ROOT) is
// empty until first boot, /etc is an overlay over /usr/share/flatcar/etc, GRUB sources the OEM
// partition's grub.cfg, and on first boot the initramfs runs real Ignition (scripts/install-ignition.sh)
// as Flatcar's does, from QEMU fw_cfg or a config-2 drive. Building needs root (mmdebstrap --mode=root, like CI); the
// finished disk is cached under the user cache dir, keyed by a hash of every input.
package standin

import (
	"fmt"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

// Version is the Flatcar version the guest claims in /usr/lib/os-release and its OEM partition.
const Version = flatcardisk.Version

// builderVersion changes whenever the build itself changes in a way the other inputs do not show.
const builderVersion = "standin-4" // 4: real Ignition; the initramfs is made with the disk, not with /usr

// Options select the variant of the guest.
type Options struct {
	// OEM is the platform the OEM partition's grub.cfg names: "qemu" (default; with
	// flatcar.autologin, like a qemu release image) or "openstack".
	OEM string
	// Sysexts are built-in system extensions, as Flatcar ships containerd-flatcar: each NAME.raw
	// goes into /usr/share/flatcar/ with /etc/extensions/NAME.raw linking to it (in the /etc
	// overlay's lower layer), so systemd-sysext merges it at every boot. Keyed by content: a
	// variant of USR-A is made from the cached one, the Debian root is not rebuilt.
	Sysexts []string
	// Log, if set, gets one line per build stage with its time (not part of the cache key).
	Log func(format string, args ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

func (o Options) oem() string {
	if o.OEM == "" {
		return "qemu"
	}
	return o.OEM
}

func (o Options) validate() error {
	switch o.oem() {
	case "qemu", "openstack":
		return nil
	}
	return fmt.Errorf("standin: OEM %q: want qemu or openstack", o.OEM)
}

// grubCfg is the OEM partition's grub.cfg of a release image for that platform.
func (o Options) grubCfg() string {
	if o.oem() == "qemu" {
		return flatcardisk.DefaultGrubCfg()
	}
	return "# Flatcar GRUB settings\n\nset oem_id=\"openstack\"\n"
}

// packages is the guest's fixed package list (on top of mmdebstrap's minbase).
var packages = []string{
	"systemd-sysv", "udev", "dbus", "kmod", "iproute2", "openssh-server", "openssh-client", "sudo",
	"curl", "jq", "e2fsprogs", "btrfs-progs", "gdisk", "fdisk", "cloud-guest-utils", "passwd",
	"bash", "coreutils", "tar", "gzip", "util-linux", "mount",
	// What Flatcar has and a real kubeadm node uses (the node proof): envsubst for CAPO's
	// preKubeadmCommands, iptables for kubelet and kube-proxy's host side.
	"gettext-base", "iptables",
}

// sourceDateEpoch pins file times in the packages' maintainer scripts' output.
const sourceDateEpoch = "1700000000"

// osRelease is /usr/lib/os-release: what Flatcar's says where sysext and inspect look.
func osRelease() string {
	return strings.Join([]string{
		`NAME="Flatcar Container Linux by Kinvolk"`,
		"ID=flatcar",
		"ID_LIKE=coreos",
		"VERSION=" + Version,
		"VERSION_ID=" + Version,
		"BUILD_ID=flatcar-capo-standin",
		"SYSEXT_LEVEL=1.0",
		`PRETTY_NAME="Flatcar Container Linux by Kinvolk ` + Version + ` (flatcar-capo stand-in on Debian bookworm)"`,
		`ANSI_COLOR="38;5;75"`,
		`HOME_URL="https://flatcar.org/"`,
		`BUG_REPORT_URL="https://issues.flatcar.org"`,
		"FLATCAR_BOARD=amd64-usr",
		"CPE_NAME=\"cpe:2.3:o:flatcar-linux:flatcar_linux:" + Version + ":*:*:*:*:*:*:*\"",
		"",
	}, "\n")
}
