package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
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
