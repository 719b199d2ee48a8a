package imagebuild_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/containerdtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// ownContainerd is the upstream containerd the boot proof runs instead of the image's built-in
// one (scripts/install-containerd.sh 2.3.7).
const ownContainerd = "2.3.7"

// TestOwnContainerdGuestBoots (issue 45's acceptance): a stand-in release whose /usr ships
// containerd 2.1.5 as Flatcar's containerd-flatcar, built with `build --method sysext
// --containerd-version 2.3.7` (its tarball and runc from a stand-in of GitHub serving the real
// 2.3.7 binaries) and kubeadm's images preloaded (Kubernetes stand-ins), boots in the stand-in guest: the
// containerd daemon that runs is 2.3.7 (ctr version's server), containerd-flatcar is masked and
// not merged, and every preloaded image was imported by it, pinned.
func TestOwnContainerdGuestBoots(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "qemu-img", "mmdebstrap", "docker-registry", "e2fsck", "debugfs", "runc")
	own := registrytest.ContainerdDirOf(t, ownContainerd)
	dir := t.TempDir()
	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}})
	// The Kubernetes stand-ins do: this proof is about containerd (the node proof runs the real
	// Kubernetes on the built-in one).
	mirror := kubetest.New(t, kubernetes.Options{})
	runc, _ := exec.LookPath("runc")
	containerdtest.Publish(t, mirror.Server, containerd.Options{Version: ownContainerd}, own, runc)
	reg := registrytest.Start(t)
	pushed, err := reg.PushKubeadm(context.Background(), kubetest.KubeadmImages(kubetest.Version, ""))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--base", "qemu", "--release-server", rel.ReleaseServer, "--keyring", rel.Keyring,
		"--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out,
		"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile, "--containerd-version", ownContainerd}, mirror.Args()...)
	start := time.Now()
	testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig}}).MustSucceed(t)
	t.Logf("build --method sysext --containerd-version %s: %.1fs", ownContainerd, time.Since(start).Seconds())
	name := "flatcar-" + rel.Channel + "-" + rel.Version + "-kube-" + kubetest.Version + "-sysext"
	raw := filepath.Join(dir, "node.raw")
	testutil.Run(t, "convert", filepath.Join(out, name+".qcow2"), raw).MustSucceed(t)

	ign, key := standin.TestUser(t)
	drive := filepath.Join(dir, "config-2.iso")
	if err := configdrive.Write(drive, ign, configdrive.MetaData{UUID: "6f1d2c3e-0000-4000-8000-00000000002d", Name: "node", Hostname: "node"}); err != nil {
		t.Fatal(err)
	}
	g := standin.Boot(t, raw, standin.BootOptions{ConfigDrive: drive, Key: key, Timeout: 600 * time.Second, Memory: 1536})
	ssh := func(cmd string) string {
		t.Helper()
		got, err := g.SSH(cmd)
		if err != nil {
			diag, _ := g.SSH("systemctl status --no-pager containerd.service systemd-sysext.service flatcar-capo-import-images.service; sudo journalctl -b --no-pager -u containerd.service -u flatcar-capo-import-images.service | tail -40")
			t.Fatalf("%s: %v\n%s\ndiagnostics:\n%s\nserial log:\n%s", cmd, err, got, diag, g.LogTail(40))
		}
		return strings.TrimSpace(got)
	}
	// The import unit may still run when SSH answers (TCG, first boot).
	ssh("for i in $(seq 300); do s=$(systemctl show -p ActiveState --value flatcar-capo-import-images.service); [ \"$s\" = active ] || [ \"$s\" = failed ] && break; sleep 1; done")
	if got := ssh("sudo ctr version"); !strings.Contains(got[strings.Index(got, "Server:"):], "v"+ownContainerd) {
		t.Errorf("the running containerd is not %s:\n%s", ownContainerd, got)
	}
	for _, c := range []struct{ cmd, want string }{
		{"readlink /etc/extensions/containerd-flatcar.raw", "/dev/null"},
		{"readlink /etc/extensions/containerd.raw", "/opt/extensions/containerd/containerd-" + ownContainerd + "-x86-64.raw"},
		{"cat /usr/lib/extension-release.d/extension-release.containerd", "SYSEXT_VERSION_ID=" + ownContainerd},
		{"systemctl show flatcar-capo-import-images.service -p ActiveState --value", "active"},
	} {
		if got := ssh(c.cmd); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.cmd, got, c.want)
		}
	}
	if got := ssh("systemd-sysext list --no-pager; ls /usr/lib/extension-release.d/"); strings.Contains(got, "containerd-flatcar") {
		t.Errorf("Flatcar's containerd-flatcar is still merged:\n%s", got)
	}
	// Imported by containerd 2.3.7's ctr (the import unit's PATH is /usr/bin) and pinned.
	ls := ssh("sudo ctr -n k8s.io images ls")
	for _, r := range pushed.Refs {
		pinned := false
		for _, l := range strings.Split(ls, "\n") {
			if strings.HasPrefix(l, r+" ") && strings.Contains(l, images.PinnedLabel) {
				pinned = true
			}
		}
		if !pinned {
			t.Errorf("%s is not in containerd %s pinned:\n%s", r, ownContainerd, ls)
		}
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
}
