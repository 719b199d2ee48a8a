package images_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// BenchmarkPreloadVsSkopeo (scripts/bench/preload.sh): kubeadm's seven images, sized like the
// real ones, pulled from the local docker-registry (TLS + login) and written as one archive,
// against `skopeo copy` of the same refs to docker archives in the same run; then a warm pull.
func BenchmarkPreloadVsSkopeo(b *testing.B) {
	testutil.RequireTools(b, "docker-registry", "skopeo")
	reg := registrytest.Start(b)
	ctx := context.Background()
	refs := kubetest.KubeadmImages("v1.33.4", "")
	at, err := reg.PushKubeadmSized(ctx, refs)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	b.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	m, _ := images.ParseMirror("registry.k8s.io=https://" + reg.Host)
	parsed, err := images.ParseRefs(refs)
	if err != nil {
		b.Fatal(err)
	}
	certDir := b.TempDir()
	ca, _ := os.ReadFile(reg.CAFile)
	os.WriteFile(filepath.Join(certDir, "ca.crt"), ca, 0o644)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		work := b.TempDir()
		cache := filepath.Join(work, "cache")
		t0 := time.Now()
		res, err := images.Pull(ctx, parsed, images.Options{Arch: "amd64", CacheDir: cache, Mirrors: images.Mirrors{m}, CAFile: reg.CAFile})
		if err != nil {
			b.Fatal(err)
		}
		a, err := images.NewArchive(cache, res.Images)
		if err != nil {
			b.Fatal(err)
		}
		f, _ := os.Create(filepath.Join(work, "images.tar"))
		if _, err := a.WriteTo(ctx, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		ours := time.Since(t0)
		total = a.Size

		t0 = time.Now()
		for j, src := range at {
			cmd := exec.Command("skopeo", "copy", "--quiet", "--src-cert-dir", certDir, "--src-creds", registrytest.User+":"+registrytest.Password,
				"docker://"+src, fmt.Sprintf("docker-archive:%s:%s", filepath.Join(work, fmt.Sprintf("skopeo-%d.tar", j)), refs[j]))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("skopeo copy %s: %v\n%s", src, err, out)
			}
		}
		skopeo := time.Since(t0)

		t0 = time.Now()
		warm, err := images.Pull(ctx, parsed, images.Options{Arch: "amd64", CacheDir: cache, Mirrors: images.Mirrors{m}, CAFile: reg.CAFile})
		if err != nil {
			b.Fatal(err)
		}
		warmT := time.Since(t0)
		fmt.Printf("preload: 7 images, %.0f MB archive: flatcar-capo pull+write %.2f s, skopeo copy of the same refs %.2f s (ratio %.2fx); warm pull %.2f s, %d bytes transferred\n",
			float64(total)/1e6, ours.Seconds(), skopeo.Seconds(), skopeo.Seconds()/ours.Seconds(), warmT.Seconds(), warm.Transferred)
	}
}
