package registrytest

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// realImage is how upstream lays out one of kubeadm's images: the binary's path in the image
// and the entrypoint (kube-* and etcd in /usr/local/bin, CoreDNS and pause at the root).
type realImage struct{ binary, inImage string }

var realImages = map[string]realImage{
	"kube-apiserver":          {"kube-apiserver", "/usr/local/bin/kube-apiserver"},
	"kube-controller-manager": {"kube-controller-manager", "/usr/local/bin/kube-controller-manager"},
	"kube-scheduler":          {"kube-scheduler", "/usr/local/bin/kube-scheduler"},
	"kube-proxy":              {"kube-proxy", "/usr/local/bin/kube-proxy"},
	"etcd":                    {"etcd", "/usr/local/bin/etcd"},
	"coredns":                 {"coredns", "/coredns"},
	"pause":                   {"pause", "/pause"},
}

// KubeadmImageList runs the real kubeadm in bin: `kubeadm config images list
// --kubernetes-version version`, the refs a node pulls for its control plane.
func KubeadmImageList(ctx context.Context, bin, version string) ([]string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubeadm"), "config", "images", "list", "--kubernetes-version", version).Output()
	if err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// PushReal pushes, for each of kubeadm's refs (registry.k8s.io/...), a real image made from the
// binaries in bin (scripts/install-kubernetes.sh): the static binary where upstream's image has
// it, upstream's entrypoint, PATH set (kubeadm's etcd pod runs plain `etcd`), linux/amd64.
func (r *Registry) PushReal(ctx context.Context, bin string, refs []string) (*Pushed, error) {
	p := &Pushed{Refs: refs, At: map[string]string{}, Digest: map[string]string{}, Manifest: map[string]string{}, Marker: map[string]string{}}
	work, err := os.MkdirTemp("", "realimages-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	for _, ref := range refs {
		rest, ok := strings.CutPrefix(ref, "registry.k8s.io/")
		if !ok {
			return nil, fmt.Errorf("registrytest: %s is not a registry.k8s.io ref", ref)
		}
		repo, _, _ := strings.Cut(rest, ":")
		spec, ok := realImages[path.Base(repo)]
		if !ok {
			return nil, fmt.Errorf("registrytest: no real image for %s", ref)
		}
		layerTar := filepath.Join(work, path.Base(repo)+".tar")
		if err := tarOneFile(layerTar, filepath.Join(bin, spec.binary), spec.inImage); err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromFile(layerTar, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		img, err := Image{Arch: "amd64", Entrypoint: []string{spec.inImage},
			Env: []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}}.buildWith(layer)
		if err != nil {
			return nil, err
		}
		at := r.Host + "/" + rest
		d, err := r.Push(ctx, at, img)
		if err != nil {
			return nil, err
		}
		p.At[ref], p.Digest[ref], p.Manifest[ref] = at, d.String(), d.String()
	}
	return p, nil
}

// buildWith is Build with one prepared layer instead of in-memory files.
func (im Image) buildWith(layer v1.Layer) (v1.Image, error) {
	return im.build([]v1.Layer{layer})
}

// tarOneFile writes a tar holding src as dst (mode 0755, root-owned, parents as directories).
func tarOneFile(out, src, dst string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%w (run scripts/install-kubernetes.sh)", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	name := strings.TrimPrefix(dst, "/")
	var dirs []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
