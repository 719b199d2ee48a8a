package standin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

// wantModules are the Debian kernel modules the guest needs (the initramfs loads them all; the
// guest's /usr/lib/modules holds the same set for modprobe): disks, NIC, filesystems, fw_cfg.
var wantModules = []string{
	"crc32c_generic", "crc32c-intel",
	"virtio_pci", "virtio_blk", "virtio_net", "virtio_scsi", "virtio_console", "virtio-rng",
	"e1000", "ata_piix", "ata_generic", "ahci", "sd_mod", "sr_mod",
	"ext4", "btrfs", "overlay", "squashfs", "loop", "isofs", "vfat", "nls_cp437", "nls_ascii", "nls_utf8",
	"qemu_fw_cfg", "fuse", "autofs4", "binfmt_misc",
	// A Kubernetes node's networking (the node proof): the bridge CNI plugin's bridge and veth
	// pairs, kube-proxy's and the portmap plugin's netfilter.
	"bridge", "br_netfilter", "veth", "nf_conntrack", "nf_nat", "ip_tables", "iptable_nat", "iptable_filter",
	"xt_conntrack", "xt_MASQUERADE", "xt_comment", "xt_mark", "xt_addrtype", "xt_nat", "xt_multiport",
	"xt_statistic", "xt_tcpudp", "ipt_REJECT", "nf_tables", "nft_compat", "nft_chain_nat", "nft_ct", "nft_nat",
}

// kernelInfo is the host's Debian kernel the guest boots, with its modules.
type kernelInfo struct {
	path    string // /boot/vmlinuz-<version>
	version string
	modDir  string // /lib/modules/<version>
}

func hostKernel() (kernelInfo, error) {
	path, err := flatcardisk.KernelPath()
	if err != nil {
		return kernelInfo{}, err
	}
	v := strings.TrimPrefix(filepath.Base(path), "vmlinuz-")
	k := kernelInfo{path: path, version: v, modDir: filepath.Join("/lib/modules", v)}
	if _, err := os.Stat(filepath.Join(k.modDir, "modules.dep")); err != nil {
		return k, fmt.Errorf("kernel %s has no modules in %s (install linux-image-amd64): %w", path, k.modDir, err)
	}
	return k, nil
}

// moduleFiles lists the .ko paths (relative to modDir) of wantModules and their dependencies,
// each after its dependencies: the order insmod needs. Built-in modules are skipped.
func (k kernelInfo) moduleFiles() ([]string, error) {
	depText, err := os.ReadFile(filepath.Join(k.modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	builtin, _ := os.ReadFile(filepath.Join(k.modDir, "modules.builtin"))
	deps := map[string][]string{} // file -> dependency files
	byName := map[string]string{} // normalised module name -> file
	for _, line := range strings.Split(string(depText), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[file] = strings.Fields(rest)
		byName[modName(file)] = file
	}
	isBuiltin := map[string]bool{}
	for _, line := range strings.Split(string(builtin), "\n") {
		if line != "" {
			isBuiltin[modName(line)] = true
		}
	}
	var order []string
	seen := map[string]bool{}
	var visit func(file string)
	visit = func(file string) {
		if seen[file] {
			return
		}
		seen[file] = true
		for _, d := range deps[file] {
			visit(d)
		}
		order = append(order, file)
	}
	for _, m := range wantModules {
		name := normalise(m)
		if f, ok := byName[name]; ok {
			visit(f)
		} else if !isBuiltin[name] {
			return nil, fmt.Errorf("kernel %s has no module %s", k.version, m)
		}
	}
	return order, nil
}

func modName(file string) string {
	base := filepath.Base(file)
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		base = strings.TrimSuffix(base, ext)
	}
	return normalise(strings.TrimSuffix(base, ".ko"))
}

func normalise(name string) string { return strings.ReplaceAll(name, "-", "_") }

// installModules copies the modules and the kernel's module indexes into root's /usr/lib/modules
// (depmod then rebuilds modules.dep for the subset).
func installModules(root string, k kernelInfo) error {
	files, err := k.moduleFiles()
	if err != nil {
		return err
	}
	dst := filepath.Join(root, "usr/lib/modules", k.version)
	for _, f := range append(files, "modules.order", "modules.builtin", "modules.builtin.modinfo") {
		data, err := os.ReadFile(filepath.Join(k.modDir, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, 0o644); err != nil {
			return err
		}
	}
	// Flatcar's kernel has /proc/config.gz; Debian's has /boot/config-VERSION, which the guest's
	// ESP lacks. kubeadm's preflight (SystemVerification) reads the kernel config from either or
	// from /usr/lib/modules/VERSION/config, and fails without one.
	config, err := os.ReadFile(filepath.Join(filepath.Dir(k.path), "config-"+k.version))
	if err != nil {
		return fmt.Errorf("the kernel's config (kubeadm's preflight reads it): %w", err)
	}
	return os.WriteFile(filepath.Join(dst, "config"), config, 0o644)
}
