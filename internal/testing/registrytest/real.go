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
	"slices"
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
	for _, ref := range refs {
		repo, _, _ := strings.Cut(strings.TrimPrefix(ref, "registry.k8s.io/"), ":")
		spec, ok := realImages[path.Base(repo)]
		if !ok {
			return nil, fmt.Errorf("registrytest: no real image for %s", ref)
		}
		entries := []tarEntry{{src: filepath.Join(bin, spec.binary), dst: spec.inImage}}
		if path.Base(repo) == "kube-proxy" {
			// Upstream's kube-proxy image is distroless-iptables: Debian's iptables with its
			// libraries, which kube-proxy runs (iptables-save/-restore) to program services.
			ipt, err := iptablesEntries()
			if err != nil {
				return nil, err
			}
			entries = append(entries, ipt...)
		}
		at, d, err := r.pushEntries(ctx, ref, entries, Image{Entrypoint: []string{spec.inImage},
			Env: []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}})
		if err != nil {
			return nil, err
		}
		p.At[ref], p.Digest[ref], p.Manifest[ref] = at, d.String(), d.String()
	}
	return p, nil
}

// PushFiles pushes as ref (a registry.k8s.io/... name, under the same path on this registry) a
// linux/amd64 image of one layer holding files (path in the image -> file on this machine, mode
// 0755) with im's Entrypoint, Cmd and Env: an upstream image remade from a binary built here. It
// returns the ref on this registry.
func (r *Registry) PushFiles(ctx context.Context, ref string, files map[string]string, im Image) (string, error) {
	var entries []tarEntry
	for dst, src := range files {
		entries = append(entries, tarEntry{src: src, dst: dst})
	}
	slices.SortFunc(entries, func(a, b tarEntry) int { return strings.Compare(a.dst, b.dst) })
	at, _, err := r.pushEntries(ctx, ref, entries, im)
	return at, err
}

// pushEntries pushes a linux/amd64 image of one layer of entries as ref (registry.k8s.io/...)
// under the same path on this registry: the ref there and the digest pushed.
func (r *Registry) pushEntries(ctx context.Context, ref string, entries []tarEntry, im Image) (string, v1.Hash, error) {
	rest, ok := strings.CutPrefix(ref, "registry.k8s.io/")
	if !ok {
		return "", v1.Hash{}, fmt.Errorf("registrytest: %s is not a registry.k8s.io ref", ref)
	}
	work, err := os.MkdirTemp("", "realimage-")
	if err != nil {
		return "", v1.Hash{}, err
	}
	defer os.RemoveAll(work)
	layerTar := filepath.Join(work, "layer.tar")
	if err := tarFiles(layerTar, entries); err != nil {
		return "", v1.Hash{}, err
	}
	layer, err := tarball.LayerFromFile(layerTar, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", v1.Hash{}, err
	}
	im.Arch = "amd64"
	img, err := im.buildWith(layer)
	if err != nil {
		return "", v1.Hash{}, err
	}
	at := r.Host + "/" + rest
	d, err := r.Push(ctx, at, img)
	return at, d, err
}

// buildWith is Build with one prepared layer instead of in-memory files.
func (im Image) buildWith(layer v1.Layer) (v1.Image, error) {
	return im.build([]v1.Layer{layer})
}

// tarEntry is a file (src copied to dst) or, with link set, a symlink dst -> link.
type tarEntry struct{ src, dst, link string }

// iptablesMulti is Debian's iptables (nft backend), what distroless-iptables carries.
const iptablesMulti = "/usr/sbin/xtables-nft-multi"

// iptablesEntries are the host's iptables (nft backend), its extensions and the shared
// libraries they load (from ldd), for the kube-proxy image.
func iptablesEntries() ([]tarEntry, error) {
	if _, err := os.Stat(iptablesMulti); err != nil {
		return nil, fmt.Errorf("the kube-proxy image carries Debian's iptables (apt-get install iptables): %w", err)
	}
	exts, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/xtables/*.so")
	files := append([]string{iptablesMulti}, exts...)
	seen := map[string]bool{}
	var out []tarEntry
	for _, f := range files {
		libs, err := exec.Command("ldd", f).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", f, err)
		}
		for _, l := range strings.Split(string(libs), "\n") {
			fields := strings.Fields(l)
			for _, p := range fields {
				if strings.HasPrefix(p, "/") && !seen[p] {
					seen[p] = true
					out = append(out, tarEntry{src: p, dst: p})
				}
			}
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, tarEntry{src: f, dst: f})
		}
	}
	for _, n := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		out = append(out, tarEntry{dst: "/usr/sbin/" + n, link: "xtables-nft-multi"})
	}
	return out, nil
}

// tarFiles writes a tar of entries (root-owned, files 0755, parents as directories).
func tarFiles(out string, entries []tarEntry) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for _, e := range entries {
		name := strings.TrimPrefix(e.dst, "/")
		var parents []string
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		if e.link != "" {
			if err := tw.WriteHeader(&tar.Header{Name: name, Linkname: e.link, Mode: 0o777, Typeflag: tar.TypeSymlink, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			continue
		}
		if err := addFile(tw, e.src, name); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, src, name string) error {
	in, err := os.Open(src) // follows symlinks: the image gets the library under its soname
	if err != nil {
		return fmt.Errorf("%w (run scripts/install-kubernetes.sh)", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
