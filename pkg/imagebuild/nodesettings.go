package imagebuild

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
)

// NodeSettings are the hardening and official-extension flags: the same node files for both
// methods (the sysext bake writes them in ROOT, the packer method's install-images.sh copies them)
// and a kernel argument in the OEM grub.cfg (stepOEM).
type NodeSettings struct {
	KeepUSBStorage    bool     `json:"keepUsbStorage"`              // --keep-usb-storage: no /etc/modprobe.d file turning USB storage off
	EnableSysext      []string `json:"enableSysext,omitempty"`      // --enable-sysext: Flatcar's official extensions, /etc/flatcar/enabled-sysext.conf
	ReleaseFileServer string   `json:"releaseFileServer,omitempty"` // --release-file-server: flatcar.release_file_server_url on the kernel command line
}

// officialSysext is a name Flatcar's enabled-sysext.conf takes (zfs, podman, nvidia-drivers-570-open).
var officialSysext = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]{0,63}$`)

func (n *NodeSettings) validate() error {
	for _, s := range n.EnableSysext {
		if !officialSysext.MatchString(s) {
			return fmt.Errorf("invalid --enable-sysext %q: the name of one of Flatcar's official extensions, as its enabled-sysext.conf lists them (lowercase letters, digits, . _ + -), e.g. --enable-sysext zfs --enable-sysext podman", s)
		}
	}
	if n.ReleaseFileServer == "" {
		return nil
	}
	u, err := url.Parse(n.ReleaseFileServer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("invalid --release-file-server %q: an http(s) URL of a mirror of Flatcar's release server, without credentials, query or fragment, e.g. --release-file-server https://mirror.example/flatcar", n.ReleaseFileServer)
	}
	// The kernel argument goes into the OEM grub.cfg, which GRUB sources: pkg/oem's rule decides.
	if _, err := oem.ParseKernelArgs(n.kernelArg()); err != nil {
		return fmt.Errorf("invalid --release-file-server %q: it becomes the kernel argument %s=URL in the OEM grub.cfg, which takes only letters, digits and . _ , : / = + @ - (no %%, ?, ~ or spaces): %w", n.ReleaseFileServer, node.ReleaseFileServerArg, err)
	}
	return nil
}

// kernelArg is the kernel argument of --release-file-server ("" without it).
func (n *NodeSettings) kernelArg() string {
	if n.ReleaseFileServer == "" {
		return ""
	}
	return node.ReleaseFileServerArg + "=" + n.ReleaseFileServer
}

// entries are the node files of the settings.
func (n *NodeSettings) entries() []rootfs.Entry {
	var out []rootfs.Entry
	if !n.KeepUSBStorage {
		out = append(out, rootfs.Bytes(node.InRoot(node.USBStorageConf), 0o644, []byte(node.USBStorageOff)))
	}
	if len(n.EnableSysext) > 0 {
		out = append(out, rootfs.Bytes(node.InRoot(node.EnabledSysextConf), 0o644, []byte(strings.Join(n.EnableSysext, "\n")+"\n")))
	}
	return out
}

// Lines are the dry run's text of the settings.
func (n *NodeSettings) Lines() []string {
	usb := "off (" + node.USBStorageConf + "; --keep-usb-storage keeps it)"
	if n.KeepUSBStorage {
		usb = "on (--keep-usb-storage)"
	}
	l := []string{"usb storage: " + usb}
	if len(n.EnableSysext) > 0 {
		l = append(l, "extensions:  "+strings.Join(n.EnableSysext, ", ")+" ("+node.EnabledSysextConf+")")
	}
	if n.ReleaseFileServer != "" {
		l = append(l, "kernel arg:  "+n.kernelArg())
	}
	return l
}
