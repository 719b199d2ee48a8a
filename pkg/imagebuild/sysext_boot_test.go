package imagebuild_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
)

// growBy enlarges the disk so partition 9 grows past 8 GiB: with 4 KiB blocks and 64-byte group
// descriptors one descriptor block covers 8 GiB, so the online resize2fs of the first boot must
// add descriptor blocks, which a filesystem without resize_inode (what go-diskfs makes) can only
// do by the kernel converting it to meta_bg.
const growBy = 10 << 30

// TestSysextBakedGuestBoots is the proof of the sysext method, from one build and one boot: a
// stand-in release (Flatcar's layout, systemd, an extend-filesystems unit like Flatcar's, and
// in /usr a containerd-flatcar sysext as Flatcar ships it: real containerd 2.1.5, runc) released
// on 127.0.0.1, built with `flatcar-capo build --method sysext --base qemu --oem openstack`
// with the Kubernetes images preloaded from a real registry through --registry-mirror and
// --registry-ca, its disk then grown by 10 GiB, boots under QEMU with the registry out of its
// reach. GrowsAndMergesKubernetes: the first boot grows partition 9 and runs resize2fs online,
// the guest's df shows the new size, systemd-sysext merged kubernetes.raw, the real kubelet
// runs from the merged /usr, kubelet.service is loaded and upheld by multi-user.target, kubeadm
// is ordered after containerd. PreloadedImagesOnRealContainerd: the first boot's import unit
// imports the images; preloadProof reads the rest (TestBuildEndToEnd's boot is the Packer
// method's half). After shutdown ROOT is e2fsck-clean and was converted to meta_bg. The sysext
// the build made is byte for byte what `sysext create` makes, so `build --sysext FILE` bakes the
// same bytes.
func TestSysextBakedGuestBoots(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "qemu-img", "mmdebstrap", "docker-registry", "e2fsck", "dumpe2fs", "debugfs")
	dir := t.TempDir()
	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}})
	// The real kubeadm, kubelet, kubectl, crictl and CNI plugins (scripts/install-kubernetes.sh),
	// served as dl.k8s.io and GitHub serve them; the images are small ones under the names the
	// real kubeadm lists (the node proof, test/nodeproof, runs the real control-plane images).
	bin := kubetest.RealNodeDir(t)
	mirror := kubetest.NewReal(t, bin, registrytest.ContainerdDir(t))
	reg := registrytest.Start(t)
	refs, err := registrytest.KubeadmImageList(context.Background(), bin, kubetest.RealVersion)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := reg.PushKubeadm(context.Background(), refs)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	start := time.Now()
	// --base qemu --oem openstack: the stand-in's openstack image is retargeted the same way.
	args := []string{"build", "--method", "sysext", "--base", "qemu", "--release-server", rel.ReleaseServer, "--keyring", rel.Keyring,
		"--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out,
		"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}
	// One SOURCE_DATE_EPOCH for the build and `sysext create` below, so their sysexts can match.
	epoch := "SOURCE_DATE_EPOCH=1700000000"
	res := testutil.RunCmd(t, testutil.Cmd{Args: append(args, mirror.Args()...), Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig, epoch}}).MustSucceed(t)
	t.Logf("build --method sysext: %.1fs\n%s", time.Since(start).Seconds(), res.Stderr)
	name := "flatcar-" + rel.Channel + "-" + rel.Version + "-kube-" + kubetest.RealVersion + "-sysext"

	created := filepath.Join(dir, "created-"+realSysextFile)
	testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"sysext", "create", "--kubernetes-version", kubetest.RealVersion, "--output-file", created}, mirror.Args()...), Env: []string{epoch}}).MustSucceed(t)
	var baked string
	for _, a := range readRecord(t, filepath.Join(out, name+".qcow2")).Artifacts {
		if a.File == realSysextFile {
			baked = a.SHA512
		}
	}
	if sum := testutil.SHA512File(t, created); baked != sum {
		t.Errorf("the build baked %s with sha512 %q; `sysext create` of the same version makes %s", realSysextFile, baked, sum)
	}

	raw := filepath.Join(dir, "node.raw")
	testutil.Run(t, "convert", filepath.Join(out, name+".qcow2"), raw).MustSucceed(t)
	_, rootBefore := rootfstest.RootRange(t, raw)
	fi, err := os.Stat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(raw, fi.Size()+growBy); err != nil {
		t.Fatal(err)
	}

	ign, key := standin.TestUser(t)
	drive := filepath.Join(dir, "config-2.iso")
	if err := configdrive.Write(drive, ign, configdrive.MetaData{UUID: "6f1d2c3e-0000-4000-8000-00000000000a", Name: "node", Hostname: "node"}); err != nil {
		t.Fatal(err)
	}
	g := standin.Boot(t, raw, standin.BootOptions{ConfigDrive: drive, Key: key, Timeout: 600 * time.Second, Memory: 1536})
	t.Run("GrowsAndMergesKubernetes", func(t *testing.T) { checkGrownAndMerged(t, g, rootBefore) })
	t.Run("PreloadedImagesOnRealContainerd", func(t *testing.T) { preloadProof{reg: reg, pushed: pushed}.check(t, g) })
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}

	root := rootfstest.ExtractRoot(t, raw)
	rootfstest.Fsck(t, root, "of ROOT after the first boot")
	sb := testutil.MustRun(t, "dumpe2fs", "-h", root)
	features := ""
	for _, l := range strings.Split(sb, "\n") {
		if strings.HasPrefix(l, "Filesystem features:") {
			features = l
		}
	}
	if !strings.Contains(features, "meta_bg") {
		t.Errorf("ROOT grew past one descriptor block without resize_inode but is not meta_bg: %s", features)
	}
	t.Log(features)
}

// checkGrownAndMerged reads from the booted node that ROOT was grown online and that the
// Kubernetes sysext is merged and wired into systemd.
func checkGrownAndMerged(t *testing.T, g *standin.Guest, rootBefore int64) {
	ssh := func(cmd string) string {
		t.Helper()
		got, err := g.SSH(cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s\nserial log:\n%s", cmd, err, got, g.LogTail(60))
		}
		return strings.TrimSpace(got)
	}
	// extend-filesystems may still be running when SSH answers.
	ssh("sudo systemctl start extend-filesystems.service 2>/dev/null; systemctl is-active extend-filesystems.service || true")
	size, err := strconv.ParseInt(ssh("df -B1 --output=size / | tail -1"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if size < rootBefore+growBy-(1<<30) {
		t.Errorf("df / says %d bytes; ROOT was %d and the disk grew by %d: not resized online", size, rootBefore, growBy)
	}
	t.Logf("ROOT %d MiB -> df %d MiB", rootBefore>>20, size>>20)
	checks := []struct{ cmd, want string }{
		{"systemd-sysext list --no-pager", "kubernetes"},
		{"cat /usr/lib/extension-release.d/extension-release.kubernetes", "ARCHITECTURE=x86-64"},
		{"readlink /etc/extensions/kubernetes.raw", "/opt/extensions/kubernetes/kubernetes-" + kubetest.RealVersion + "-x86-64.raw"},
		{"/usr/bin/kubelet --version", "Kubernetes " + kubetest.RealVersion},
		{"systemctl show kubelet.service -p LoadState --value", "loaded"},
		{"systemctl show multi-user.target -p Upholds --value", "kubelet.service"},
		{"systemctl show kubelet.service -p FragmentPath --value", "lib/systemd/system/kubelet.service"}, // /lib is usr/lib
		{"systemctl show kubeadm.service -p After --value", "containerd.service"},
		{"systemctl show kubeadm.service -p Requires --value", "coreos-metadata.service"},
		{"systemctl is-enabled update-engine.service locksmithd.service || true", "masked\nmasked"},
	}
	failed := false
	for _, c := range checks {
		if got, err := g.SSH(c.cmd); err != nil || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q (%v) lacks %q", c.cmd, got, err, c.want)
			failed = true
		}
	}
	if failed {
		diag, _ := g.SSH("systemctl status --no-pager systemd-sysext.service ensure-sysext.service kubelet.service; sudo journalctl -b --no-pager -u systemd-sysext.service | tail -30; sudo dmesg | grep -i -e squashfs -e loop | tail")
		t.Logf("diagnostics:\n%s", diag)
	}
	t.Logf("kernel: %s", ssh("sudo dmesg | grep -i -e 'EXT4-fs.*resiz' -e 'meta_bg' || true"))
}
