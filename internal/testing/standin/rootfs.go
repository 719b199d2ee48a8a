package standin

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/qemuboot"
)

// mirrorURL is the Debian mirror from the host's own apt sources (deb822 .sources or one-line
// .list entries for bookworm), the only one reachable on build machines and CI.
func mirrorURL() string {
	var files []string
	for _, g := range []string{"/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	for _, f := range files {
		if u := mirrorIn(f); u != "" {
			return u
		}
	}
	return "http://deb.debian.org/debian"
}

// mirrorIn returns the first URI of file that serves the suite bookworm (not -security).
func mirrorIn(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(file, ".sources") {
		for _, stanza := range strings.Split(string(data), "\n\n") {
			fields := map[string]string{}
			for _, line := range strings.Split(stanza, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
					fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
			}
			if !strings.Contains(" "+fields["Types"]+" ", " deb ") || !slices.Contains(strings.Fields(fields["Suites"]), "bookworm") {
				continue
			}
			if uris := strings.Fields(fields["URIs"]); len(uris) > 0 {
				return uris[0]
			}
		}
		return ""
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "deb" {
			if strings.HasPrefix(f[1], "[") { // options: deb [arch=amd64] URL suite
				for len(f) > 3 && !strings.HasSuffix(f[1], "]") {
					f = append(f[:1], f[2:]...)
				}
				f = append(f[:1], f[2:]...)
			}
			if len(f) >= 3 && f[2] == "bookworm" {
				return f[1]
			}
		}
	}
	return ""
}

// debootstrap makes the Debian root in dir (which must not exist yet).
func debootstrap(ctx context.Context, dir string) error {
	args := []string{"--mode=root", "--variant=minbase", "--include=" + strings.Join(packages, ","),
		"bookworm", dir, mirrorURL()}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+sourceDateEpoch, "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mmdebstrap %s: %w\n%s", strings.Join(args, " "), err, qemuboot.Tail(out, 4000))
	}
	return nil
}

// enabled and disabled are the unit changes that make the Debian root behave like Flatcar.
var (
	enabled = []string{"systemd-networkd.service", "systemd-sysext.service", "ensure-sysext.service",
		"containerd.service", "kubeadm.service", "update-engine.service", "locksmithd.service",
		"boot.mount", "oem.mount", "extend-filesystems.service", "ssh.service"}
	// Debian's timers only add noise; systemd-firstboot would prompt on the console of a first boot.
	masked = []string{"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
		"e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "systemd-firstboot.service"}
)

// customize turns the Debian root in dir into the Flatcar-like /usr: our files and units, the
// os-release, a core user, the kernel modules, then /etc moved to /usr/share/flatcar/etc.
func customize(ctx context.Context, dir string, kernel kernelInfo) error {
	if err := writeGuestFiles(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, "usr/lib/os-release")); err != nil {
		return err
	}
	writes := map[string]string{
		"usr/lib/os-release": osRelease(),
		"etc/hostname":       "localhost\n",
		"etc/hosts":          "127.0.0.1\tlocalhost\n::1\tlocalhost\n", // else every sudo warns it cannot resolve localhost
		"etc/resolv.conf":    "nameserver 10.0.2.3\n",                  // QEMU user networking's DNS
	}
	for name, data := range writes {
		p := filepath.Join(dir, name)
		os.Remove(p)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	// Made on first boot, as on Flatcar: the machine ID and the SSH host keys.
	keys, _ := filepath.Glob(filepath.Join(dir, "etc/ssh/ssh_host_*"))
	for _, k := range append(keys, filepath.Join(dir, "etc/machine-id")) {
		if err := os.Remove(k); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc/extensions"), 0o755); err != nil {
		return err
	}
	// boot.mount mounts the ESP, as on Flatcar: systemd's GPT auto-mounting would add an
	// automount of its own on /boot.
	gen := filepath.Join(dir, "etc/systemd/system-generators")
	if err := os.MkdirAll(gen, 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/dev/null", filepath.Join(gen, "systemd-gpt-auto-generator")); err != nil {
		return err
	}
	// Flatcar's core user (uid 500, sudo), whose home tmpfiles makes on the empty ROOT.
	if err := chroot(ctx, dir, "useradd", "-u", "500", "-U", "-G", "sudo", "-M", "-d", "/home/core", "-s", "/bin/bash", "core"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/lib/tmpfiles.d/flatcar-core.conf"), []byte("d /home/core 0755 core core -\n"), 0o644); err != nil {
		return err
	}
	if err := installModules(dir, kernel); err != nil {
		return err
	}
	if err := chroot(ctx, dir, "depmod", kernel.version); err != nil {
		return err
	}
	if err := chroot(ctx, dir, append([]string{"systemctl", "enable"}, enabled...)...); err != nil {
		return err
	}
	if err := chroot(ctx, dir, append([]string{"systemctl", "mask"}, masked...)...); err != nil {
		return err
	}
	// Debian's /etc becomes the overlay's lower layer; the image's ROOT stays empty.
	lower := filepath.Join(dir, "usr/share/flatcar/etc")
	if err := os.MkdirAll(filepath.Dir(lower), 0o755); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, "etc"), lower)
}

// writeGuestFiles copies the embedded guest/ tree over the root; files starting with #! are executable.
func writeGuestFiles(dir string) error {
	return fs.WalkDir(guestFiles, "guest", func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == "guest" {
			return err
		}
		dst := filepath.Join(dir, strings.TrimPrefix(path, "guest/"))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := guestFiles.ReadFile(path)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(string(data), "#!") {
			mode = 0o755
		}
		if strings.HasPrefix(path, "guest/etc/sudoers.d/") {
			mode = 0o440
		}
		os.Remove(dst)
		if err := os.WriteFile(dst, data, mode); err != nil {
			return err
		}
		return os.Chmod(dst, mode)
	})
}

func chroot(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{dir}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "SYSTEMD_OFFLINE=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("chroot %s %s: %w\n%s", dir, strings.Join(args, " "), err, out)
	}
	return nil
}
