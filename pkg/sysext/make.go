package sysext

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"io"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// MakeOptions are `sysext create`'s: the image's choices, the Kubernetes downloads (or a
// directory of binaries instead), and where the sysext goes.
type MakeOptions struct {
	// Image is the image's choices; its Kubernetes is taken from Download.Kubernetes.
	Image CreateOptions
	// Download is the version asked for (exact, a minor or stable), the architecture in any
	// spelling release.ParseArch takes, the mirrors and the cache.
	Download kubernetes.Options
	// Network is the client of the version lookup and the downloads.
	Network httpx.Options
	// Binaries is a directory of files downloaded elsewhere (KubernetesInputFromDir).
	Binaries string
	// OutputFile is where the sysext goes; empty: KubernetesFileName in the current directory.
	OutputFile string
	// DefaultCacheDir gives Download.CacheDir when it is empty and something is downloaded.
	DefaultCacheDir func() (string, error)
	// Log gets one line per download.
	Log io.Writer
}

// Made is the sysext written, with the hashes a server publishes next to it.
type Made struct {
	*Info
	SHA256 string `json:"sha256"`
	SHA512 string `json:"sha512"`
	// Version is the resolved Kubernetes version, Arch its architecture (systemd's spelling).
	Version string `json:"-"`
	Arch    string `json:"-"`
}

// MakeKubernetes checks o, resolves the Kubernetes version, downloads and verifies the binaries
// (or takes them from o.Binaries), and writes the Kubernetes sysext. Every value is checked
// before the first download.
func MakeKubernetes(ctx context.Context, o MakeOptions) (*Made, error) {
	image, dl := o.Image, o.Download
	image.Kubernetes = dl.Kubernetes
	if err := image.Validate(); err != nil {
		return nil, err
	}
	var err error
	if dl.Arch, err = release.ParseArch(dl.Arch); err != nil {
		return nil, err
	}
	if err := dl.Validate(); err != nil { // the version's form and the mirrors, before any lookup
		return nil, err
	}
	arch, err := Arch(dl.Arch)
	if err != nil {
		return nil, err
	}
	if err := o.Network.Validate(); err != nil {
		return nil, err
	}
	c := httpx.New(o.Network)
	if dl.Kubernetes, err = kubernetes.ResolveVersion(ctx, c, dl.Mirror, dl.Kubernetes); err != nil {
		return nil, err
	}
	if err := ValidVersion(dl.Kubernetes); err != nil {
		return nil, err
	}
	out := o.OutputFile
	if out == "" {
		out, _ = KubernetesFileName(dl.Kubernetes, arch)
	}
	if err := atomicfile.CheckPath(out); err != nil { // before the downloads
		return nil, err
	}
	in, err := inputOf(ctx, c, o, dl, arch)
	if err != nil {
		return nil, err
	}
	in.ReleaseID, in.Compression = image.ReleaseID, image.Compression
	if image.Compression == "gzip" {
		in.CompressionLevel = image.Level
	}
	spec, err := KubernetesSpec(in)
	if err != nil {
		return nil, err
	}
	return createAndHash(ctx, spec, out, dl.Kubernetes, arch)
}

// createAndHash writes spec's sysext to out and hashes what it wrote, for the report.
func createAndHash(ctx context.Context, spec Spec, out, version, arch string) (*Made, error) {
	info, err := Create(ctx, spec, out)
	if err != nil {
		return nil, err
	}
	sums, _, err := digest.Files(info.Path, sha256.New(), sha512.New())
	if err != nil {
		return nil, err
	}
	return &Made{Info: info, SHA256: sums[0], SHA512: sums[1], Version: version, Arch: arch}, nil
}

// inputOf is the sysext's files: o.Binaries', or the verified downloads of dl.
func inputOf(ctx context.Context, c *httpx.Client, o MakeOptions, dl kubernetes.Options, arch string) (KubernetesInput, error) {
	if o.Binaries != "" {
		return kubernetesInputFromDir(o.Binaries, dl.Kubernetes, arch)
	}
	if dl.CacheDir == "" && o.DefaultCacheDir != nil {
		d, err := o.DefaultCacheDir()
		if err != nil {
			return KubernetesInput{}, err
		}
		dl.CacheDir = d
	}
	set, err := kubernetes.Download(ctx, c, dl, o.Log)
	if err != nil {
		return KubernetesInput{}, err
	}
	return KubernetesInputFromSet(set), nil
}

// KubernetesInputFromSet maps verified downloads to the Kubernetes sysext's inputs, for
// `sysext create` and the sysext build method alike.
func KubernetesInputFromSet(set *kubernetes.Set) KubernetesInput {
	path := func(name string) string {
		d, _ := set.ByName(name)
		return d.Path
	}
	return KubernetesInput{Version: set.Options.Kubernetes, Arch: set.Options.Arch,
		Kubelet: path("bin/kubelet"), Kubeadm: path("bin/kubeadm"), Kubectl: path("bin/kubectl"),
		CNIPlugins: path("cni-plugins.tgz"), Crictl: path("crictl.tar.gz")}
}
