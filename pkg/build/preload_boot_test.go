package build_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/images/registrytest"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/standin"
)

// crictlInGuest is where the test's containerd sysext puts the real crictl (the Kubernetes
// sysext's usr/bin/crictl is the stand-in's).
const crictlInGuest = "/usr/libexec/flatcar-capo-test/crictl"

// containerdUnit is Flatcar's containerd.service as its containerd-flatcar sysext ships it.
const containerdUnit = `[Unit]
Description=containerd container runtime
After=network.target

[Service]
Delegate=yes
Environment=CONTAINERD_CONFIG=/usr/share/containerd/config.toml
ExecStart=/usr/bin/containerd --config ${CONTAINERD_CONFIG}
KillMode=process
Restart=always
LimitNOFILE=1048576
TasksMax=infinity

[Install]
WantedBy=multi-user.target
`

// containerdSysext makes a containerd-flatcar sysext like Flatcar's: the real containerd 2.1.5,
// ctr and shim (scripts/install-containerd.sh), Debian's runc, Flatcar's config.toml and unit,
// plus crictl for the test.
func containerdSysext(t *testing.T, dir string) string {
	t.Helper()
	bin := registrytest.ContainerdDir(t)
	testutil.RequireTool(t, "runc")
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", "images", "testdata", "flatcar-containerd-config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	config := strings.ReplaceAll(string(cfg), "CONFD", "/etc/containerd/conf.d")
	out := filepath.Join(dir, "containerd-flatcar.raw")
	spec := sysext.Spec{Name: "containerd-flatcar", Release: sysext.Release{"ID": "_any", "ARCHITECTURE": "x86-64"},
		Files: []sysext.File{
			{Path: "usr/bin/containerd", Mode: 0o755, Source: filepath.Join(bin, "containerd")},
			{Path: "usr/bin/ctr", Mode: 0o755, Source: filepath.Join(bin, "ctr")},
			{Path: "usr/bin/containerd-shim-runc-v2", Mode: 0o755, Source: filepath.Join(bin, "containerd-shim-runc-v2")},
			{Path: "usr/bin/runc", Mode: 0o755, Source: runc},
			{Path: strings.TrimPrefix(crictlInGuest, "/"), Mode: 0o755, Source: filepath.Join(bin, "crictl")},
			{Path: "usr/share/containerd/config.toml", Mode: 0o644, Data: []byte(config)},
			{Path: "usr/lib/systemd/system/containerd.service", Mode: 0o644, Data: []byte(containerdUnit)},
		}}
	if _, err := sysext.Create(context.Background(), spec, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPreloadedImagesOnRealContainerd is the proof of preloading: the stand-in guest with a
// containerd-flatcar sysext (real containerd 2.1.5, runc) and the Kubernetes sysext, built with
// `build --method sysext` from a real registry through --registry-mirror and --registry-ca,
// boots with the registry out of its reach. Read from the guest: crictl lists every preloaded
// image under kubeadm's name with the digest pushed, each pinned; the import finished before
// kubelet started and kubeadm is ordered after it; the archive is gone; `ctr run` of a
// preloaded image prints its marker. Then, with the registry forwarded into the guest, crictl
// pulls an image that was not preloaded through the mirror in hosts.toml, trusting the CA.
func TestPreloadedImagesOnRealContainerd(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "qemu-img", "mmdebstrap", "docker-registry")
	dir := t.TempDir()
	ctrd := containerdSysext(t, dir)
	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{})
	mirror := kubetest.New(t, kubernetes.Options{})
	reg := registrytest.Start(t)
	ctx := context.Background()
	pushed, err := reg.PushKubeadm(ctx, kubetest.KubeadmImages(kubetest.Version, ""))
	if err != nil {
		t.Fatal(err)
	}
	later, _ := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"later": []byte("pulled later")}}.Build()
	laterDigest, err := reg.Push(ctx, reg.Host+"/pulled-later:v1", later)
	if err != nil {
		t.Fatal(err)
	}
	k8s := filepath.Join(dir, "kubernetes-"+kubetest.Version+"-x86-64.raw")
	testutil.Run(t, append([]string{"sysext", "create", "--kubernetes-version", kubetest.Version, "--output-file", k8s}, mirror.Args()...)...).MustSucceed(t)

	out := filepath.Join(dir, "out")
	start := time.Now()
	args := []string{"build", "--method", "sysext", "--base", "qemu", "--oem", "openstack", "--release-server", rel.ReleaseServer,
		"--keyring", rel.Keyring, "--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(dir, "cache"),
		"--output-dir", out, "--kubernetes-version", kubetest.Version, "--sysext", k8s, "--sysext", ctrd,
		"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}
	res := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig}}).MustSucceed(t)
	t.Logf("build: %.1fs\n%s", time.Since(start).Seconds(), res.Stderr)
	name := "flatcar-" + rel.Channel + "-" + rel.Version + "-kube-" + kubetest.Version + "-sysext"
	raw := filepath.Join(dir, "node.raw")
	testutil.Run(t, "convert", filepath.Join(out, name+".qcow2"), raw).MustSucceed(t)

	ign, key := standin.TestUser(t)
	drive := filepath.Join(dir, "config-2.iso")
	if err := configdrive.Write(drive, ign, configdrive.MetaData{UUID: "6f1d2c3e-0000-4000-8000-00000000000b", Name: "node", Hostname: "node"}); err != nil {
		t.Fatal(err)
	}
	g := standin.Boot(t, raw, standin.BootOptions{ConfigDrive: drive, Key: key, Timeout: 600 * time.Second, Memory: 1536})
	ssh := func(cmd string) string {
		t.Helper()
		got, err := g.SSH(cmd)
		if err != nil {
			diag, _ := g.SSH("systemctl status --no-pager containerd.service " + images.ImportUnitName + " kubelet.service; sudo journalctl -b --no-pager -u containerd.service -u " + images.ImportUnitName + " | tail -40")
			t.Fatalf("%s: %v\n%s\ndiagnostics:\n%s", cmd, err, got, diag)
		}
		return strings.TrimSpace(got)
	}
	// The import may still run when SSH answers (TCG, first boot): wait for it.
	ssh("for i in $(seq 300); do s=$(systemctl show -p ActiveState --value " + images.ImportUnitName + "); [ \"$s\" = active ] || [ \"$s\" = failed ] && break; sleep 1; done; systemctl is-active " + images.ImportUnitName)
	crictl := "sudo " + crictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock "
	var list struct {
		Images []struct {
			RepoTags    []string `json:"repoTags"`
			RepoDigests []string `json:"repoDigests"`
			Pinned      bool     `json:"pinned"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(ssh(crictl+"images -o json")), &list); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, im := range list.Images {
		for _, tag := range im.RepoTags {
			d := pushed.Digest[tag]
			if d == "" {
				continue
			}
			repo, _, _ := strings.Cut(tag, ":")
			if !hasString(im.RepoDigests, repo+"@"+d) {
				t.Errorf("%s: repo digests %v, pushed %s", tag, im.RepoDigests, d)
			}
			if !im.Pinned {
				t.Errorf("%s is not pinned", tag)
			}
			found[tag] = true
		}
	}
	for _, r := range pushed.Refs {
		if !found[r] {
			t.Errorf("crictl images lacks %s:\n%+v", r, list.Images)
		}
	}
	if labels := ssh("sudo ctr -n k8s.io images ls"); strings.Count(labels, images.PinnedLabel) < len(pushed.Refs) {
		t.Errorf("ctr images ls: fewer than %d pinned:\n%s", len(pushed.Refs), labels)
	}
	// Ordering: the import was done before kubelet started; kubeadm is ordered after it.
	ts := func(unit, prop string) int64 {
		n, err := strconv.ParseInt(ssh("systemctl show -p "+prop+" --value "+unit), 10, 64)
		if err != nil {
			t.Fatalf("%s %s: %v", unit, prop, err)
		}
		return n
	}
	imported, kubelet := ts(images.ImportUnitName, "ActiveEnterTimestampMonotonic"), ts("kubelet.service", "InactiveExitTimestampMonotonic")
	if imported == 0 || kubelet == 0 || kubelet < imported {
		t.Errorf("import active at %d µs, kubelet started at %d µs: kubelet did not wait for the images", imported, kubelet)
	}
	if after := ssh("systemctl show -p After --value kubeadm.service"); !strings.Contains(after, images.ImportUnitName) {
		t.Errorf("kubeadm.service After=%s lacks the import unit", after)
	}
	if got := ssh("test -e /" + images.ArchiveFile + " && echo present || echo gone"); got != "gone" {
		t.Errorf("the archive is still in ROOT after the import (%s): images stored twice", got)
	}
	proxy := pushed.Refs[3] // kube-proxy
	if got := ssh("sudo ctr -n k8s.io run --rm " + proxy + " preload-check"); !strings.Contains(got, pushed.Marker[proxy]) {
		t.Errorf("ctr run %s printed %q, want %q", proxy, got, pushed.Marker[proxy])
	}
	t.Logf("import done %.1fs after boot, kubelet started %.1fs after boot", float64(imported)/1e6, float64(kubelet)/1e6)

	// With the registry reachable again (same address as on the host), a pull of an image that
	// was not preloaded goes through the mirror in hosts.toml and trusts the CA from certs.d.
	stop, err := g.ForwardRemote(reg.Host, reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ssh(crictl + "pull --creds " + registrytest.User + ":" + registrytest.Password + " registry.k8s.io/pulled-later:v1")
	if got := ssh(crictl + "images -o json registry.k8s.io/pulled-later"); !strings.Contains(got, "registry.k8s.io/pulled-later@"+laterDigest.String()) {
		t.Errorf("pulled-later through the mirror: %s, pushed %s", got, laterDigest)
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
