package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// ImageOptions are the container-image preload and containerd settings of a build.
type ImageOptions struct {
	NoPreload  bool     // --no-preload-images
	Refs       []string // --image (repeatable)
	File       string   // --images-file
	Repository string   // --image-repository: kubeadm's, for its list and the manifests
	Mirrors    []string // --registry-mirror REGISTRY=URL
	CAFile     string   // --registry-ca
	HTTPProxy  string   // --http-proxy
	HTTPSProxy string   // --https-proxy
	NoProxy    string   // --no-proxy

	mirrors images.Mirrors
	extra   []string // Refs plus the file's
}

// Preload reports whether the build preloads images (the default, both methods).
func (io *ImageOptions) Preload(method string) bool { return !io.NoPreload }

// validate parses what needs no network: mirrors, refs, the CA and proxy URLs.
func (io *ImageOptions) validate(method string) error {
	io.mirrors = nil
	for _, m := range io.Mirrors {
		pm, err := images.ParseMirror(m)
		if err != nil {
			return err
		}
		io.mirrors = append(io.mirrors, pm)
	}
	io.extra = append([]string(nil), io.Refs...)
	if io.File != "" {
		refs, err := images.ReadRefsFile(io.File)
		if err != nil {
			return err
		}
		io.extra = append(io.extra, refs...)
	}
	for _, r := range io.extra {
		if _, err := images.ParseRef(r); err != nil {
			return fmt.Errorf("--image: %w", err)
		}
	}
	if io.Repository != "" {
		if _, err := images.ParseRef(io.Repository + "/pause:x"); err != nil || strings.Contains(io.Repository, "://") {
			return fmt.Errorf("invalid --image-repository %q: want a registry/path such as registry.example:5000/k8s", io.Repository)
		}
	}
	if io.CAFile != "" {
		if _, err := images.LoadCA(io.CAFile); err != nil {
			return err
		}
	}
	for _, p := range []struct{ flag, v string }{{"http-proxy", io.HTTPProxy}, {"https-proxy", io.HTTPSProxy}} {
		if p.v == "" {
			continue
		}
		if u, err := url.Parse(p.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("invalid --%s %q: want http(s)://host:port", p.flag, p.v)
		}
	}
	if strings.ContainsAny(io.NoProxy+io.HTTPProxy+io.HTTPSProxy, "\"\n\\ ") {
		return fmt.Errorf("--http-proxy, --https-proxy and --no-proxy take no spaces, quotes, backslashes or newlines")
	}
	if io.NoPreload && (len(io.extra) > 0) {
		return fmt.Errorf("--no-preload-images and --image/--images-file contradict each other: leave one out")
	}
	return nil
}

// inputs are the image settings in the build's inputs key (the CA by content).
func (io *ImageOptions) inputs(method string) []string {
	if !io.Preload(method) && len(io.Mirrors) == 0 && io.CAFile == "" && io.HTTPProxy+io.HTTPSProxy+io.NoProxy == "" {
		return nil
	}
	in := []string{fmt.Sprintf("preload=%v", io.Preload(method)), "repository=" + io.Repository}
	for _, r := range io.extra {
		in = append(in, "image="+r)
	}
	for _, m := range io.Mirrors {
		in = append(in, "mirror="+m)
	}
	if io.CAFile != "" {
		data, _ := os.ReadFile(io.CAFile)
		s := sha256.Sum256(data)
		in = append(in, "ca=sha256:"+hex.EncodeToString(s[:]))
	}
	return append(in, "proxy="+io.HTTPProxy+","+io.HTTPSProxy+","+io.NoProxy)
}

// ImagesDryRun is --dry-run's list of the images a build would preload, with sizes as the
// image cache knows them (no network: a ref never pulled has no size yet).
type ImagesDryRun struct {
	Kubeadm    string        `json:"kubeadm"` // how kubeadm's list was found
	Images     []ImageDryRun `json:"images"`
	TotalBytes int64         `json:"totalBytes"` // of the images whose size is known
	Unknown    int           `json:"unknown"`    // images not in the cache yet
	Mirrors    []string      `json:"mirrors,omitempty"`
}

// ImageDryRun is one image of the plan.
type ImageDryRun struct {
	Name   string `json:"name"`
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size"` // -1 when not in the cache
}

func planImages(ctx context.Context, o *Options) *ImagesDryRun {
	io := &o.Images
	if !io.Preload(o.Method) {
		return nil
	}
	p := &ImagesDryRun{Images: []ImageDryRun{}, Mirrors: io.Mirrors}
	var list []string
	ko := o.Kubernetes
	ko.CacheDir = o.CacheDir
	kubeadm := filepath.Join(o.CacheDir, "kubernetes", ko.Kubernetes, ko.Arch, "kubeadm")
	if _, err := os.Stat(kubeadm); err == nil && o.CacheDir != "" {
		var err error
		if list, err = images.KubeadmList(ctx, kubeadm, ko.Kubernetes, io.Repository); err != nil {
			p.Kubeadm = "the cached kubeadm failed to list its images: " + err.Error()
		} else {
			p.Kubeadm = "kubeadm config images list --kubernetes-version " + ko.Kubernetes + " (the cached kubeadm)"
		}
	} else {
		p.Kubeadm = "kubeadm config images list --kubernetes-version " + ko.Kubernetes + ", run once kubeadm is downloaded and verified"
	}
	refs, err := images.ParseRefs(append(list, io.extra...))
	if err != nil {
		return p
	}
	for i, im := range images.Cached(refs, images.Options{Arch: o.Release.Arch, CacheDir: o.CacheDir, Mirrors: io.mirrors}) {
		e := ImageDryRun{Name: refs[i].Name, Size: -1}
		if im != nil {
			e.Digest, e.Size = im.Digest, im.Size
			p.TotalBytes += im.Size
		} else {
			p.Unknown++
		}
		p.Images = append(p.Images, e)
	}
	return p
}

// Lines are the dry run's text form.
func (p *ImagesDryRun) Lines() []string {
	l := []string{"images:      " + p.Kubeadm}
	for _, im := range p.Images {
		size := "size unknown (not pulled yet)"
		if im.Size >= 0 {
			size = fmt.Sprintf("%.1f MiB, %s", float64(im.Size)/(1<<20), im.Digest)
		}
		l = append(l, "  "+im.Name+"  "+size)
	}
	total := fmt.Sprintf("  total: %.1f MiB", float64(p.TotalBytes)/(1<<20))
	if p.Unknown > 0 {
		total += fmt.Sprintf(" + %d images not in the cache", p.Unknown)
	}
	return append(l, total)
}
