package images_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/images/registrytest"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// Layer sizes (MiB) like kubeadm's real images for 1.33 (registry.k8s.io, linux/amd64,
// compressed): about 250 MB in all, each image a shared base layer plus its own.
var benchSizes = map[string][]int{
	"kube-apiserver": {2, 28}, "kube-controller-manager": {2, 26}, "kube-scheduler": {2, 19},
	"kube-proxy": {2, 30}, "coredns": {2, 21}, "pause": {1}, "etcd": {2, 100},
}

func randomTar(seed uint64, mib int) []byte {
	data := make([]byte, mib<<20)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i+8 <= len(data); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	return registrytest.TarOf(map[string][]byte{fmt.Sprintf("data-%d", seed): data})
}

// BenchmarkPreloadVsSkopeo (scripts/bench/preload.sh): kubeadm's seven images, sized like the
// real ones, pulled from the local docker-registry (TLS + login) and written as one archive,
// against `skopeo copy` of the same refs to docker archives in the same run; then a warm pull.
func BenchmarkPreloadVsSkopeo(b *testing.B) {
	testutil.RequireTools(b, "docker-registry", "skopeo")
	reg := registrytest.Start(b)
	ctx := context.Background()
	base := randomTar(1, 2)
	var refs, at []string
	var total int64
	for i, r := range kubetest.KubeadmImages("v1.33.4", "") {
		repo := strings.TrimPrefix(r, "registry.k8s.io/")
		short, _, _ := strings.Cut(repo, ":")
		short = short[strings.LastIndex(short, "/")+1:]
		var layers [][]byte
		for j, mib := range benchSizes[short] {
			if j == 0 && len(benchSizes[short]) > 1 {
				layers = append(layers, base)
			} else {
				layers = append(layers, randomTar(uint64(100+i), mib))
			}
		}
		img, err := registrytest.Image{Arch: "amd64", Layers: layers}.Build()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := reg.Push(ctx, reg.Host+"/"+repo, img); err != nil {
			b.Fatal(err)
		}
		refs, at = append(refs, r), append(at, reg.Host+"/"+repo)
	}
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
