package imagebuild

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// --kubernetes-version stable or 1.33 resolves on every run: the same answer reuses the
// artifact, a new patch on the mirror makes a new image named after it.
func TestPipelineResolvesKubernetesVersion(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat")
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	m := kubetest.New(t, kubernetes.Options{})
	cache, out := filepath.Join(t.TempDir(), "cache"), t.TempDir()
	run := func(version string) *Result {
		t.Helper()
		ko := kubernetes.Options{Kubernetes: version, Mirror: m.KubernetesMirror(), GitHubMirror: m.GitHubMirror()}
		o := &Options{Method: "fake", BaseImage: base, Release: release.Release{Channel: "stable", Version: "4459.2.0", Arch: "amd64"},
			Kubernetes: ko, CacheDir: cache, OutputDir: out, ToolVersion: "test"}
		rec, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("--kubernetes-version %s: %v", version, err)
		}
		return rec
	}
	rec := run("stable")
	if rec.KubernetesVersion != kubetest.Version || rec.ImageName != "flatcar-stable-4459.2.0-kube-"+kubetest.Version ||
		rec.Inputs.Crictl != kubetest.Crictl || rec.Inputs.CNI != kubernetes.DefaultCNIVersion || rec.Reused {
		t.Fatalf("stable: record %s %s crictl %s cni %s reused %v", rec.KubernetesVersion, rec.ImageName, rec.Inputs.Crictl, rec.Inputs.CNI, rec.Reused)
	}
	if rec := run("stable"); !rec.Reused {
		t.Error("a re-run that resolves to the same version did not reuse the artifact")
	}
	m.AddVersion("v1.33.5")
	m.SetMarker("stable-1.33.txt", []byte("v1.33.5\n"))
	rec = run("1.33")
	if rec.Reused || rec.KubernetesVersion != "v1.33.5" || rec.ImageName != "flatcar-stable-4459.2.0-kube-v1.33.5" {
		t.Errorf("new patch: reused %v, %s, %s", rec.Reused, rec.KubernetesVersion, rec.ImageName)
	}
}
