package standin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// must runs cmd in the guest and fails the test if it fails.
func must(t *testing.T, g *Guest, cmd string) string {
	t.Helper()
	out, err := g.SSH(cmd)
	if err != nil {
		t.Fatalf("%v\nserial log tail:\n%s", err, g.LogTail(2000))
	}
	return strings.TrimSpace(out)
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// waitRunning waits for the boot to finish and checks that no unit failed.
func waitRunning(t *testing.T, g *Guest) {
	t.Helper()
	state, _ := g.SSH("timeout 300 systemctl is-system-running --wait")
	if failed := must(t, g, "systemctl --failed --no-legend --plain"); strings.TrimSpace(state) != "running" || failed != "" {
		jobs, _ := g.SSH("systemctl list-jobs --no-legend; journalctl -b -p warning --no-pager | tail -40")
		t.Errorf("system state %q, failed units:\n%s\n%s", strings.TrimSpace(state), failed, jobs)
	}
}

// rootEntries lists ROOT's top directory through GRUB's ext4 driver (no mount needed).
func rootEntries(t *testing.T, img string) string {
	t.Helper()
	return strings.TrimSpace(testutil.MustRun(t, "grub-fstest", img, "ls", "(loop0,gpt9)/"))
}

// TestFirstBootFwCfgThenGrow boots the qemu guest from an empty ROOT with Ignition in fw_cfg,
// then enlarges the disk and boots again: the second boot is not a first boot, and ROOT is
// grown to the new end and resized online.
func TestFirstBootFwCfgThenGrow(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "grub-fstest", "e2fsck", "losetup")
	img := CopyImage(t, Image(t, Options{}))
	if got := rootEntries(t, img); got != "lost+found/" {
		t.Fatalf("the image's ROOT is not empty: %s", got)
	}
	ign, key := TestUser(t)
	start := time.Now()
	g := Boot(t, img, BootOptions{Ignition: ign, Key: key})
	t.Logf("first boot to SSH: %.1fs", time.Since(start).Seconds())
	waitRunning(t, g)

	cmdline, err := g.Cmdline()
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "/proc/cmdline", cmdline, "flatcar.first_boot=detected", "flatcar.oem.id=qemu", "flatcar.autologin", "root=LABEL=ROOT")
	if got := must(t, g, "cat /proc/1/comm"); got != "systemd" {
		t.Errorf("PID 1 is %q", got)
	}
	t.Logf("boot timing:\n%s", must(t, g, "systemd-analyze; systemd-analyze blame | head -12"))
	mounts := must(t, g, "for m in / /usr /etc /boot /oem; do findmnt -no TARGET,SOURCE,FSTYPE,OPTIONS --mountpoint $m; done")
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Errorf("findmnt line %q", line)
			continue
		}
		ok := map[string]bool{
			"/":     f[2] == "ext4" && strings.HasPrefix(f[3], "rw"),
			"/usr":  f[2] == "ext4" && strings.HasPrefix(f[3], "ro"),
			"/etc":  f[2] == "overlay" && strings.Contains(f[3], "lowerdir=/sysroot/usr/share/flatcar/etc"),
			"/boot": f[2] == "vfat",
			"/oem":  f[2] == "btrfs",
		}[f[0]]
		if !ok {
			t.Errorf("unexpected mount: %s", line)
		}
	}
	if n := len(strings.Split(mounts, "\n")); n != 5 {
		t.Errorf("want 5 mounts, got:\n%s", mounts)
	}
	wantContains(t, "labels", must(t, g, "lsblk -no PARTLABEL,LABEL $(findmnt -no SOURCE /)"), "ROOT")
	wantContains(t, "/etc/os-release", must(t, g, "cat /etc/os-release"), "ID=flatcar\n", "SYSEXT_LEVEL=1.0\n", "VERSION_ID="+Version+"\n")
	for _, l := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if got := must(t, g, "readlink "+l); got != "usr"+l {
			t.Errorf("%s -> %q, want usr%s", l, got, l)
		}
	}
	// Ignition's part: the user with its key (we are logged in with it), sudo, the flag gone;
	// Ignition read the config from fw_cfg in the initramfs.
	wantContains(t, "id", must(t, g, "id"), "("+TestUserName+")", "(sudo)")
	if got := must(t, g, "sudo -n whoami"); got != "root" {
		t.Errorf("sudo -n whoami = %q", got)
	}
	if out, err := g.SSH("test -e /boot/flatcar/first_boot"); err == nil {
		t.Errorf("/boot/flatcar/first_boot still exists after the first boot %s", out)
	}
	wantContains(t, "/run/ignition.log", must(t, g, "cat /run/ignition.log"), "loading QEMU firmware config module", ignitionParsed(ign),
		`adding ssh keys to user "`+TestUserName+`"`)
	if _, err := g.SSH("test -e /oem/config.ign"); err == nil {
		t.Error("/oem/config.ign exists: Ignition does not write it")
	}
	// The units image builds order against and mask.
	for _, u := range []string{"containerd.service", "coreos-metadata.service", "kubeadm.service", "update-engine.service", "locksmithd.service", "ensure-sysext.service"} {
		if got := must(t, g, "systemctl show -p LoadState --value "+u); got != "loaded" {
			t.Errorf("%s LoadState %q", u, got)
		}
	}
	for _, u := range []string{"systemd-sysext.service", "ssh.service", "systemd-networkd.service", "update-engine.service", "locksmithd.service"} {
		if got, _ := g.SSH("systemctl is-enabled " + u); strings.TrimSpace(got) != "enabled" {
			t.Errorf("%s is %q, want enabled", u, strings.TrimSpace(got))
		}
	}
	wantContains(t, "tools", must(t, g, "PATH=$PATH:/usr/sbin:/sbin; for c in bash tar gzip curl jq scp sudo growpart sgdisk resize2fs ip modprobe; do command -v $c; done"), "/scp", "/jq", "/growpart")
	wantContains(t, "modules", must(t, g, "lsmod"), "overlay", "btrfs")
	sizeBefore, _ := strconv.ParseInt(must(t, g, "df -B1 --output=size / | tail -1"), 10, 64)
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if got := rootEntries(t, img); !strings.Contains(got, "etc/") || !strings.Contains(got, "home/") {
		t.Errorf("ROOT after the first boot holds only %s", got)
	}

	// Enlarge the disk by 2 GiB: the next boot moves the backup GPT, grows partition 9 and
	// resizes the mounted ext4.
	st, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, st.Size()+2<<30); err != nil {
		t.Fatal(err)
	}
	g = Boot(t, img, BootOptions{Key: key})
	waitRunning(t, g)
	cmdline, _ = g.Cmdline()
	if strings.Contains(cmdline, "flatcar.first_boot") {
		t.Errorf("second boot is a first boot again: %s", cmdline)
	}
	sizeAfter, _ := strconv.ParseInt(must(t, g, "df -B1 --output=size / | tail -1"), 10, 64)
	if sizeAfter < sizeBefore+(3<<30)/2 {
		t.Errorf("ROOT is %d bytes after growing the disk by 2 GiB (was %d)\n%s", sizeAfter, sizeBefore, must(t, g, "journalctl -b -u extend-filesystems --no-pager"))
	}
	t.Logf("ROOT %d -> %d bytes", sizeBefore, sizeAfter)
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	fsckROOT(t, img)
}

// fsckROOT runs e2fsck -fn on partition 9 of img through a read-only loop device.
func fsckROOT(t *testing.T, img string) {
	t.Helper()
	if !testutil.HaveRoot(t, "e2fsck of ROOT through a loop device") {
		return
	}
	start, size, err := flatcardisk.PartitionRange(img, "ROOT")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-r", "-f", "--show", "-o", strconv.FormatInt(start, 10), "--sizelimit", strconv.FormatInt(size, 10), img).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	defer exec.Command("losetup", "-d", loop).Run()
	if out, err := exec.Command("e2fsck", "-fn", loop).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn ROOT: %v\n%s", err, out)
	}
}

// TestFirstBootConfigDriveUEFI boots the openstack guest with OVMF and Ignition on a config-2
// ISO, as Nova hands it over.
func TestFirstBootConfigDriveUEFI(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "xorriso")
	img := CopyImage(t, Image(t, Options{OEM: "openstack"}))
	ign, key := TestUser(t)
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "openstack/latest"), 0o755)
	os.WriteFile(filepath.Join(tree, "openstack/latest/user_data"), ign, 0o644)
	os.WriteFile(filepath.Join(tree, "openstack/latest/meta_data.json"), []byte(`{"uuid":"5c1f2f5e-0000-4000-8000-000000000001","name":"standin","hostname":"standin.novalocal"}`), 0o644)
	os.MkdirAll(filepath.Join(tree, "ec2/latest"), 0o755)
	os.WriteFile(filepath.Join(tree, "ec2/latest/meta-data.json"), []byte(`{"instance-id":"i-0000002a","instance-type":"m1.small","local-ipv4":"10.0.2.15"}`), 0o644)
	iso := filepath.Join(dir, "config-2.iso")
	testutil.MustRun(t, "xorriso", "-as", "mkisofs", "-quiet", "-V", "config-2", "-J", "-R", "-o", iso, tree)
	g := Boot(t, img, BootOptions{ConfigDrive: iso, UEFI: true, Key: key})
	waitRunning(t, g)
	cmdline, _ := g.Cmdline()
	wantContains(t, "/proc/cmdline", cmdline, "flatcar.first_boot=detected", "flatcar.oem.id=openstack")
	if strings.Contains(cmdline, "flatcar.autologin") {
		t.Errorf("the openstack image has autologin: %s", cmdline)
	}
	wantContains(t, "id", must(t, g, "id"), "("+TestUserName+")", "(sudo)")
	if _, err := g.SSH("test -e /boot/flatcar/first_boot"); err == nil {
		t.Error("/boot/flatcar/first_boot still exists after the first boot")
	}
	wantContains(t, "/oem", must(t, g, "sudo cat /oem/oem-release /oem/grub.cfg; ls /oem/sysext"), "ID=openstack", `oem_id="openstack"`,
		"active-oem-openstack", "oem-openstack-"+Version+".raw")
	// afterburn's keys from the drive's meta_data.json and ec2/latest/meta-data.json, no others
	// (public-ipv4 is not there: no IPV4_PUBLIC).
	must(t, g, "sudo systemctl start coreos-metadata.service")
	if got, want := must(t, g, "sort /run/metadata/flatcar"), strings.Join([]string{"COREOS_OPENSTACK_HOSTNAME=standin.novalocal",
		"COREOS_OPENSTACK_INSTANCE_ID=i-0000002a", "COREOS_OPENSTACK_INSTANCE_TYPE=m1.small",
		"COREOS_OPENSTACK_INSTANCE_UUID=5c1f2f5e-0000-4000-8000-000000000001", "COREOS_OPENSTACK_IPV4_LOCAL=10.0.2.15"}, "\n"); got != want {
		t.Errorf("/run/metadata/flatcar:\n%s\nwant:\n%s", got, want)
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// TestBuildIsCached: a second Build is a cache hit on the same file.
func TestBuildIsCached(t *testing.T) {
	first := Image(t, Options{})
	start := time.Now()
	again, err := build(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("second Build returned %s, first %s", again, first)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cached Build took %s", d)
	}
	if _, err := build(context.Background(), Options{OEM: "azure"}); err == nil || !strings.Contains(err.Error(), "want qemu or openstack") {
		t.Errorf("Build with OEM azure: %v", err)
	}
}
