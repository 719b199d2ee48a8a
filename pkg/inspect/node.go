package inspect

import (
	"path"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// NodeSettings are the hardening and official-extension settings of the node: USB storage (a
// /etc/modprobe.d file in ROOT), the official extensions Flatcar enables at boot
// (/etc/flatcar/enabled-sysext.conf) and the release server they come from (the kernel argument
// in the OEM grub.cfg).
type NodeSettings struct {
	USBStorageOff     bool     `json:"usbStorageOff"`
	USBStorageFile    string   `json:"usbStorageFile"` // the modprobe.d file that turns it off
	EnabledSysext     []string `json:"enabledSysext"`
	ReleaseFileServer string   `json:"releaseFileServer"`
}

const modprobeDir = "/etc/modprobe.d"

// readNode fills r.Node from ROOT (fsys may be nil: ROOT unreadable) and the OEM settings.
func (r *Report) readNode(fsys *disk.FS) {
	n := &r.Node
	n.EnabledSysext = []string{}
	for _, w := range strings.Fields(r.OEM.Settings.LinuxAppend) {
		if v, ok := strings.CutPrefix(w, node.ReleaseFileServerArg+"="); ok {
			n.ReleaseFileServer = v // the kernel takes the last one
		}
	}
	if fsys == nil {
		return
	}
	if ents, err := readDir(fsys, modprobeDir); err == nil {
		for _, e := range ents {
			p := path.Join(modprobeDir, e.name)
			if e.kind == "file" && strings.HasSuffix(e.name, ".conf") && disablesUSBStorage(readSmall(fsys, p)) {
				n.USBStorageOff, n.USBStorageFile = true, p
			}
		}
	}
	for _, l := range strings.Split(readSmall(fsys, node.EnabledSysextConf), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			n.EnabledSysext = append(n.EnabledSysext, l)
		}
	}
}

// disablesUSBStorage says whether a modprobe.d file keeps usb-storage from loading: an install
// command that does not load it, or a blacklist (modprobe treats - and _ alike).
func disablesUSBStorage(conf string) bool {
	for _, l := range strings.Split(conf, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || strings.ReplaceAll(f[1], "_", "-") != "usb-storage" {
			continue
		}
		if f[0] == "blacklist" || f[0] == "install" && len(f) > 2 && (f[2] == "/bin/false" || f[2] == "/bin/true") {
			return true
		}
	}
	return false
}
