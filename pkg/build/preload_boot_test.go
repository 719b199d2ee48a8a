package build_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
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
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/standin"
)

// TestPreloadedImagesOnRealContainerd is the sysext method's proof of preloading: a stand-in
// release whose /usr carries a containerd-flatcar sysext as Flatcar's does (real containerd
// 2.1.5, runc), built with `build --method sysext` and the Kubernetes sysext from a real
// registry through --registry-mirror and --registry-ca, boots with the registry out of its
// reach; the first boot's import unit imports the images; preloadProof reads the rest.
// TestBuildEndToEnd's boot is the Packer method's half.
func TestPreloadedImagesOnRealContainerd(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "qemu-img", "mmdebstrap", "docker-registry")
	dir := t.TempDir()
	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}})
	mirror := kubetest.New(t, kubernetes.Options{})
	reg := registrytest.Start(t)
	pushed, err := reg.PushKubeadm(context.Background(), kubetest.KubeadmImages(kubetest.Version, ""))
	if err != nil {
		t.Fatal(err)
	}
	k8s := filepath.Join(dir, "kubernetes-"+kubetest.Version+"-x86-64.raw")
	testutil.Run(t, append([]string{"sysext", "create", "--kubernetes-version", kubetest.Version, "--output-file", k8s}, mirror.Args()...)...).MustSucceed(t)

	out := filepath.Join(dir, "out")
	start := time.Now()
	args := []string{"build", "--method", "sysext", "--base", "qemu", "--oem", "openstack", "--release-server", rel.ReleaseServer,
		"--keyring", rel.Keyring, "--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(dir, "cache"),
		"--output-dir", out, "--kubernetes-version", kubetest.Version, "--sysext", k8s,
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
	preloadProof{reg: reg, pushed: pushed}.check(t, g)
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// preloadProof reads from a booted node, with the registry out of its reach, what issue 16 asks
// of preloaded images: crictl lists every one under kubeadm's name with the digest pushed, each
// pinned; the archive is gone (no image stored twice); the import was done before kubelet
// started and kubelet and kubeadm are ordered after the import unit; `ctr run` of a preloaded
// image prints its marker. Then, with the registry forwarded into the guest (same address as
// on the host), crictl pulls an image that was not preloaded through the mirror in hosts.toml,
// trusting the CA from certs.d.
type preloadProof struct {
	reg    *registrytest.Registry
	pushed *registrytest.Pushed
	// inVM: the Packer build VM imported the images, so the first boot's import unit must find
	// nothing to do (its condition, the archive, false); else that unit imports them.
	inVM bool
}

func (p preloadProof) check(t *testing.T, g *standin.Guest) {
	t.Helper()
	start := time.Now()
	later, _ := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"later": []byte("pulled later")}}.Build()
	laterDigest, err := p.reg.Push(context.Background(), p.reg.Host+"/pulled-later:v1", later)
	if err != nil {
		t.Fatal(err)
	}
	unit := images.ImportUnitName
	ssh := func(cmd string) string {
		t.Helper()
		got, err := g.SSH(cmd)
		if err != nil {
			diag, _ := g.SSH("systemctl status --no-pager containerd.service " + unit + " kubelet.service; sudo journalctl -b --no-pager -u containerd.service -u " + unit + " | tail -40")
			t.Fatalf("%s: %v\n%s\ndiagnostics:\n%s", cmd, err, got, diag)
		}
		return strings.TrimSpace(got)
	}
	// The unit may still run (or wait for containerd) when SSH answers (TCG, first boot): wait
	// until it is active or failed, or its condition was found false.
	ssh("for i in $(seq 300); do s=$(systemctl show -p ActiveState --value " + unit + "); c=$(systemctl show -p ConditionTimestampMonotonic --value " + unit +
		"); [ \"$s\" = active ] || [ \"$s\" = failed ] || { [ \"$c\" != 0 ] && [ -z \"$(systemctl show -p Job --value " + unit + ")\" ]; } && break; sleep 1; done")
	state := ssh("systemctl show -p ActiveState --value "+unit) + " " + ssh("systemctl show -p ConditionResult --value "+unit)
	if want := "active yes"; p.inVM {
		if want = "inactive no"; state != want {
			t.Errorf("the first boot's import unit: %q, want %q (nothing left to import after the build VM's import)", state, want)
		}
	} else if state != want {
		t.Fatalf("the import unit: %q, want %q", state, want)
	}
	crictl := "sudo " + registrytest.CrictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock "
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
			d := p.pushed.Digest[tag]
			if d == "" {
				continue
			}
			repo, _, _ := strings.Cut(tag, ":")
			if !slices.Contains(im.RepoDigests, repo+"@"+d) {
				t.Errorf("%s: repo digests %v, pushed %s", tag, im.RepoDigests, d)
			}
			if !im.Pinned {
				t.Errorf("%s is not pinned", tag)
			}
			found[tag] = true
		}
	}
	for _, r := range p.pushed.Refs {
		if !found[r] {
			t.Errorf("crictl images lacks %s:\n%+v", r, list.Images)
		}
	}
	if labels := ssh("sudo ctr -n k8s.io images ls"); strings.Count(labels, images.PinnedLabel) < len(p.pushed.Refs) {
		t.Errorf("ctr images ls: fewer than %d pinned:\n%s", len(p.pushed.Refs), labels)
	}
	// Ordering: the import (or, after the build VM's, its condition check) was done before
	// kubelet started; kubelet and kubeadm are ordered after it.
	ts := func(unit, prop string) int64 {
		n, err := strconv.ParseInt(ssh("systemctl show -p "+prop+" --value "+unit), 10, 64)
		if err != nil {
			t.Fatalf("%s %s: %v", unit, prop, err)
		}
		return n
	}
	prop := "ActiveEnterTimestampMonotonic"
	if p.inVM {
		prop = "ConditionTimestampMonotonic"
	}
	imported, kubelet := ts(unit, prop), ts("kubelet.service", "InactiveExitTimestampMonotonic")
	if imported == 0 || kubelet == 0 || kubelet < imported {
		t.Errorf("import unit done at %d µs, kubelet started at %d µs: kubelet did not wait for the images", imported, kubelet)
	}
	for _, u := range []string{"kubelet.service", "kubeadm.service"} {
		if after := ssh("systemctl show -p After --value " + u); !strings.Contains(after, unit) {
			t.Errorf("%s After=%s lacks the import unit", u, after)
		}
	}
	if got := ssh("sudo find / -xdev -name '*.tar' -path '*flatcar-capo*' 2>/dev/null; true"); strings.Contains(got, ".tar") {
		t.Errorf("an image archive is still on the node after the import (images stored twice):\n%s", got)
	}
	proxy := p.pushed.Refs[3] // kube-proxy
	if got := ssh("sudo ctr -n k8s.io run --rm " + proxy + " preload-check"); !strings.Contains(got, p.pushed.Marker[proxy]) {
		t.Errorf("ctr run %s printed %q, want %q", proxy, got, p.pushed.Marker[proxy])
	}
	t.Logf("import unit done %.1fs after boot, kubelet started %.1fs after boot", float64(imported)/1e6, float64(kubelet)/1e6)

	stop, err := g.ForwardRemote(p.reg.Host, p.reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ssh(crictl + "pull --creds " + registrytest.User + ":" + registrytest.Password + " registry.k8s.io/pulled-later:v1")
	if got := ssh(crictl + "images -o json registry.k8s.io/pulled-later"); !strings.Contains(got, "registry.k8s.io/pulled-later@"+laterDigest.String()) {
		t.Errorf("pulled-later through the mirror: %s, pushed %s", got, laterDigest)
	}
	t.Logf("preload proof read from the guest in %.1fs", time.Since(start).Seconds())
}
