package occmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// TestBuildPreloadsTheManager: `flatcar-capo build --method sysext --image REF` with Push's REF
// (a registry.k8s.io name) and --registry-mirror registry.k8s.io=https://HOST preloads the
// manager from the test registry, under the name the DaemonSet asks for, at the digest pushed
// (the registry's own tag link). The stand-in kubeadm and a synthetic Flatcar disk keep it short.
func TestBuildPreloadsTheManager(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs", "docker-registry")
	dir := Dir(t)
	reg := registrytest.Start(t)
	ctx := context.Background()
	mirror := kubetest.New(t, kubernetes.Options{})
	if _, err := reg.PushKubeadm(ctx, kubetest.KubeadmImages(kubetest.Version, "")); err != nil {
		t.Fatal(err)
	}
	ref, err := Push(ctx, reg, dir)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(strings.TrimPrefix(ref, "registry.k8s.io/"), ":")
	link, err := os.ReadFile(filepath.Join(reg.Storage, "docker/registry/v2/repositories", repo, "_manifests/tags", tag, "current/link"))
	if err != nil {
		t.Fatalf("the registry has no tag %s: %v", ref, err)
	}
	pushed := strings.TrimSpace(string(link))

	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	work := t.TempDir()
	out := filepath.Join(work, "out")
	args := append([]string{"build", "--method", "sysext", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(work, "cache"), "--output-dir", out, "--image", ref,
		"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}, mirror.Args()...)
	res := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig}}).MustSucceed(t)
	qcows, _ := filepath.Glob(filepath.Join(out, "*.qcow2"))
	if len(qcows) != 1 {
		t.Fatalf("artifacts in %s: %v\n%s", out, qcows, res.Stderr)
	}
	rec, err := record.Read(qcows[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range rec.Images {
		if im.Name == ref {
			if im.Digest != pushed || im.Platform != "linux/amd64" {
				t.Fatalf("preloaded %+v, the registry's %s is %s", im, ref, pushed)
			}
			return
		}
	}
	t.Fatalf("the image does not preload %s: %+v", ref, rec.Images)
}
