package imagebuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// A Kubernetes sysext without SYSEXT_VERSION_ID (made by another tool) gives its version through
// its own kubeadm (`kubeadm version -o short`); one that holds no kubeadm and no version says so.
func TestSysextKubernetesFromKubeadm(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"kubelet", "kubeadm", "kubectl"} {
		if err := os.WriteFile(filepath.Join(dir, b), kubetest.Script(b, "v1.31.2"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := sysext.KubernetesSpec(sysext.KubernetesInput{Version: "v1.31.2", Arch: "amd64",
		Kubelet: filepath.Join(dir, "kubelet"), Kubeadm: filepath.Join(dir, "kubeadm"), Kubectl: filepath.Join(dir, "kubectl")})
	if err != nil {
		t.Fatal(err)
	}
	delete(spec.Release, sysext.KubernetesVersionKey)
	raw := filepath.Join(dir, "kubernetes.raw")
	if _, err := sysext.Create(context.Background(), spec, raw); err != nil {
		t.Fatal(err)
	}
	if rel, _ := sysext.ReadFile(raw, sysext.ReleasePath(sysext.KubernetesName), 4096); strings.Contains(string(rel), "v1.31.2") {
		t.Fatalf("the test sysext still names its version in extension-release:\n%s", rel)
	}
	o := &Options{Method: MethodSysext, Sysext: []string{raw}}
	v, from, err := sysextKubernetes(context.Background(), o, map[string]sysextSource{raw: {Path: raw}})
	if err != nil || v != "v1.31.2" || !strings.Contains(from, "kubeadm") {
		t.Fatalf("got %q from %q (err %v), want v1.31.2 from its kubeadm", v, from, err)
	}
	// A --kubernetes-version that disagrees is the caller's error (exit 2), naming both versions.
	if err := agreeWithSysext("v1.30.0", v, from); err == nil || !strings.Contains(err.Error(), "v1.31.2") {
		t.Errorf("a disagreeing version: %v", err)
	}
	for _, ok := range []string{"stable", "1.31", "v1.31.2"} {
		if err := agreeWithSysext(ok, v, from); err != nil {
			t.Errorf("%s agrees with v1.31.2: %v", ok, err)
		}
	}
}
