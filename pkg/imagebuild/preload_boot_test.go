package imagebuild_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

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
	unit := node.ImportUnitName
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
