package imagebuild

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// ImageOptions are the container-image preload and containerd settings of a build.
type ImageOptions struct {
	NoPreload  bool     // --no-preload-images
	Refs       []string // --image (repeatable)
	File       string   // --images-file
	Repository string   // --image-repository: kubeadm's, for its list and the manifests
	Mirrors    []string // --registry-mirror REGISTRY=URL, in order
	MirrorOnly bool     // --registry-mirror-only: the node never falls back to the registry itself
	NodeAuth   bool     // --node-registry-auth: the docker config's logins for the node's CRI
	CAFile     string   // --registry-ca
	HTTPProxy  string   // --http-proxy
	HTTPSProxy string   // --https-proxy
	NoProxy    string   // --no-proxy

	mirrors images.Mirrors
	extra   []string // Refs plus the file's
}

// validate parses what needs no network: mirrors, refs, the CA and proxy URLs.
func (io *ImageOptions) validate() error {
	var err error
	if io.mirrors, err = images.ParseMirrors(io.Mirrors); err != nil {
		return err
	}
	if io.NodeAuth && len(io.mirrors) == 0 && io.NoPreload {
		return fmt.Errorf("--node-registry-auth needs a --registry-mirror (or preloaded images' registries) to take the logins for")
	}
	if io.MirrorOnly && len(io.mirrors) == 0 {
		return fmt.Errorf("--registry-mirror-only needs a --registry-mirror: give the mirrors the node may use")
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
	if err := images.ValidateProxies(io.HTTPProxy, io.HTTPSProxy, io.NoProxy); err != nil {
		return err
	}
	if io.NoPreload && (len(io.extra) > 0) {
		return fmt.Errorf("--no-preload-images and --image/--images-file contradict each other: leave one out")
	}
	return nil
}

// inputs are the image settings in the build's inputs key (the CA by content).
func (io *ImageOptions) inputs() []string {
	if io.NoPreload && len(io.Mirrors) == 0 && io.CAFile == "" && io.HTTPProxy+io.HTTPSProxy+io.NoProxy == "" { // mirror-only needs a mirror
		return nil
	}
	in := []string{fmt.Sprintf("preload=%v", !io.NoPreload), "repository=" + io.Repository}
	for _, r := range io.extra {
		in = append(in, "image="+r)
	}
	for _, m := range io.Mirrors {
		in = append(in, "mirror="+m)
	}
	if io.MirrorOnly {
		in = append(in, "mirror-only")
	}
	if io.NodeAuth {
		in = append(in, "node-auth") // the logins themselves: secrets(), by the step that reads them
	}
	if io.CAFile != "" {
		sum, _, _ := digest.SHA256(io.CAFile) // validate has read it
		in = append(in, "ca=sha256:"+sum)
	}
	// The record shows the proxies without a password (secrets puts them into the key only).
	return append(in, "proxy="+redact.URL(io.HTTPProxy)+","+redact.URL(io.HTTPSProxy)+","+io.NoProxy)
}

// CarriesSecret says whether the image holds a credential (registry logins, a proxy password).
func (io *ImageOptions) CarriesSecret() bool { return len(io.SecretKinds()) > 0 }

// SecretKinds name the credentials the image holds, as the build record lists them.
func (io *ImageOptions) SecretKinds() []string {
	var kinds []string
	if io.NodeAuth {
		kinds = append(kinds, "registry logins (--node-registry-auth)")
	}
	if images.ProxyHasPassword(io.HTTPProxy) || images.ProxyHasPassword(io.HTTPSProxy) {
		kinds = append(kinds, "a proxy password (--http-proxy/--https-proxy)")
	}
	return kinds
}

// Warnings are what the build says before it starts about the settings it bakes in.
func (io *ImageOptions) Warnings() []string {
	var w []string
	if io.NodeAuth {
		w = append(w, "--node-registry-auth: the image will hold registry logins (in "+node.ContainerdAuthDropIn+", root-only) and is written 0600; anyone who can boot or read it can pull with them: build and upload refuse to make it public or community in Glance; do not share it, and prefer a read-only robot account")
	}
	if images.ProxyHasPassword(io.HTTPProxy) || images.ProxyHasPassword(io.HTTPSProxy) {
		w = append(w, "the proxy URL carries a password: the image will hold it (in "+node.ProxyEnvFile+", root-only) and is written 0600; build and upload refuse to make it public or community in Glance; do not share it")
	}
	if (io.HTTPProxy != "" || io.HTTPSProxy != "") && io.NoProxy == "" {
		w = append(w, "NO_PROXY holds only "+images.NoProxyList("")+": add the API server and its load balancer, the service and pod CIDRs and .svc,.cluster.local with --no-proxy, or kubelet and containerd send cluster traffic to the proxy")
	}
	return w
}

// secrets are what changes the artifact but must not be stored: the proxy URLs in full.
func (io *ImageOptions) secrets() string {
	if !io.CarriesSecret() {
		return ""
	}
	s := "\x00proxy=" + io.HTTPProxy + "," + io.HTTPSProxy
	if io.NodeAuth { // a changed login rebuilds (the mirrors' logins; registries' are known later)
		auths, _ := images.NodeAuth(images.NodeAuthHosts(io.mirrors, nil))
		for _, a := range auths {
			s += "\x00auth=" + a.Host + "," + a.Username + "," + a.Password + "," + a.IdentityToken + "," + a.Auth
		}
	}
	return s
}

// ImagesDryRun is --dry-run's list of the images a build would preload, with sizes as the
// image cache knows them (no network: a ref never pulled has no size yet).
type ImagesDryRun struct {
	Kubeadm    string        `json:"kubeadm"` // how kubeadm's list was found
	Images     []ImageDryRun `json:"images"`
	TotalBytes int64         `json:"totalBytes"` // of the images whose size is known
	Unknown    int           `json:"unknown"`    // images not in the cache yet
	Mirrors    []string      `json:"mirrors,omitempty"`
	MirrorOnly bool          `json:"mirrorOnly,omitempty"`
	CAFile     string        `json:"registryCA,omitempty"`
	HTTPProxy  string        `json:"httpProxy,omitempty"` // password masked
	HTTPSProxy string        `json:"httpsProxy,omitempty"`
	NoProxy    string        `json:"noProxy,omitempty"` // what the node gets, node-local entries included
	NodeAuth   []string      `json:"nodeAuthHosts,omitempty"`
	// Hosts are the certs.d hosts.toml files the node gets, by path.
	Hosts map[string]string `json:"hostsToml,omitempty"`
}

// ImageDryRun is one image of the plan.
type ImageDryRun struct {
	Name   string `json:"name"`
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size"` // -1 when not in the cache
}

func planImages(ctx context.Context, o *Options) *ImagesDryRun {
	io := &o.Images
	if io.NoPreload {
		return nil
	}
	p := &ImagesDryRun{Images: []ImageDryRun{}, Mirrors: io.Mirrors, MirrorOnly: io.MirrorOnly, CAFile: io.CAFile,
		HTTPProxy: redact.URL(io.HTTPProxy), HTTPSProxy: redact.URL(io.HTTPSProxy)}
	if io.HTTPProxy != "" || io.HTTPSProxy != "" {
		p.NoProxy = images.NoProxyList(io.NoProxy)
	}
	var list []string
	ko := o.Kubernetes
	kubeadm := filepath.Join(o.CacheDir, "kubernetes", ko.Kubernetes, ko.Arch, "kubeadm")
	if _, err := os.Stat(kubeadm); err == nil && o.CacheDir != "" {
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
	node := images.Node{Mirrors: io.mirrors, MirrorOnly: io.MirrorOnly, CAFile: io.CAFile, Registries: images.Registries(refs)}
	if files, err := node.Files(0); err == nil {
		for _, f := range files {
			if strings.HasSuffix(f.Path, "/hosts.toml") {
				if p.Hosts == nil {
					p.Hosts = map[string]string{}
				}
				p.Hosts["/"+f.Path] = string(f.Content)
			}
		}
	}
	if io.NodeAuth {
		p.NodeAuth = images.NodeAuthHosts(io.mirrors, node.Registries)
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
	l = append(l, total)
	if p.CAFile != "" {
		l = append(l, "registry CA:  "+p.CAFile+" (trusted here, and on the node in certs.d and /etc/ssl/certs)")
	}
	for _, path := range slices.Sorted(maps.Keys(p.Hosts)) {
		l = append(l, "node "+path+":")
		for _, line := range strings.Split(strings.TrimRight(p.Hosts[path], "\n"), "\n") {
			l = append(l, "    "+line)
		}
	}
	if p.HTTPProxy != "" || p.HTTPSProxy != "" {
		l = append(l, fmt.Sprintf("node proxy:   HTTP_PROXY=%s HTTPS_PROXY=%s NO_PROXY=%s (containerd, kubelet)", p.HTTPProxy, p.HTTPSProxy, p.NoProxy))
	}
	if len(p.NodeAuth) > 0 {
		l = append(l, "node logins:  "+strings.Join(p.NodeAuth, ", ")+" (--node-registry-auth, from the docker config; a secret in the image)")
	}
	return l
}
