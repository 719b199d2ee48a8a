// Package kubernetes downloads what a CAPO node needs on the build host: kubeadm, kubelet and
// kubectl from the Kubernetes release bucket, crictl and the CNI plugins from their GitHub
// releases, each checked against its published .sha256 before anything boots, and cached.
package kubernetes

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Defaults. Kubernetes follows the mirror's release/stable.txt (the resolved version goes into
// the image name and the record, so a build stays reproducible); crictl and CNI fit its minor.
const (
	DefaultVersion    = stable
	DefaultCNIVersion = "v1.7.1"
	// ExampleVersion is the exact version help texts show.
	ExampleVersion      = "v1.36.1"
	DefaultMirror       = "https://dl.k8s.io/release"
	DefaultGitHubMirror = "https://github.com"
)

// Options name the versions and where to get them.
type Options struct {
	Kubernetes, Crictl, CNI string // versions with the leading v; Kubernetes may be stable or 1.35 until Resolve
	// Crictl and CNI default (when empty) to DefaultCrictlFor/DefaultCNIFor the resolved Kubernetes.
	Arch         string // amd64 or arm64
	Mirror       string // replaces https://dl.k8s.io/release
	GitHubMirror string // replaces https://github.com (crictl, CNI)
	CacheDir     string // <CacheDir>/kubernetes/...
}

var versionRe = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Validate fills defaults and checks the versions and mirrors. A stable or minor Kubernetes
// version passes (Resolve makes it exact); crictl and CNI defaults need the exact one.
func (o *Options) Validate() error {
	o.Kubernetes = cmp.Or(o.Kubernetes, DefaultVersion)
	if _, err := ParseSpec(o.Kubernetes); err != nil {
		return err
	}
	if IsExact(o.Kubernetes) {
		o.Crictl = cmp.Or(o.Crictl, defaultCrictlFor(o.Kubernetes))
		o.CNI = cmp.Or(o.CNI, DefaultCNIFor(o.Kubernetes))
	}
	o.Mirror = cmp.Or(o.Mirror, DefaultMirror)
	o.GitHubMirror = cmp.Or(o.GitHubMirror, DefaultGitHubMirror)
	o.Arch = cmp.Or(o.Arch, "amd64")
	for _, v := range []struct{ flag, val, eg string }{{"crictl-version", o.Crictl, "v1.36.0"}, {"cni-version", o.CNI, DefaultCNIVersion}} {
		if v.val != "" && !versionRe.MatchString(v.val) {
			return errs.Invalidf("invalid --%s %q: want a release tag with the v, e.g. %s", v.flag, v.val, v.eg)
		}
	}
	for _, m := range []struct{ flag, val string }{{"kubernetes-mirror", o.Mirror}, {"github-mirror", o.GitHubMirror}} {
		if !strings.HasPrefix(m.val, "http://") && !strings.HasPrefix(m.val, "https://") {
			return errs.Invalidf("invalid --%s %q: want an http(s) URL", m.flag, m.val)
		}
	}
	switch o.Arch {
	case "amd64", "arm64":
	default:
		return errs.Invalidf("invalid arch %q for Kubernetes downloads: amd64 or arm64", o.Arch)
	}
	o.Mirror = strings.TrimRight(o.Mirror, "/")
	o.GitHubMirror = strings.TrimRight(o.GitHubMirror, "/")
	return nil
}

// File is one download: Name is where it goes in the payload.
type File struct {
	Name string `json:"name"` // payload name: bin/kubeadm, crictl.tar.gz, cni-plugins.tgz
	URL  string `json:"url"`
}

// Files are the five downloads for o, in payload order (o resolved: exact versions).
func (o *Options) Files() []File {
	k := fmt.Sprintf("%s/%s/bin/linux/%s/", o.Mirror, o.Kubernetes, o.Arch)
	return []File{
		{Name: "bin/kubeadm", URL: k + "kubeadm"},
		{Name: "bin/kubelet", URL: k + "kubelet"},
		{Name: "bin/kubectl", URL: k + "kubectl"},
		{Name: "crictl.tar.gz", URL: fmt.Sprintf("%s/kubernetes-sigs/cri-tools/releases/download/%s/crictl-%s-linux-%s.tar.gz",
			o.GitHubMirror, o.Crictl, o.Crictl, o.Arch)},
		{Name: "cni-plugins.tgz", URL: fmt.Sprintf("%s/containernetworking/plugins/releases/download/%s/cni-plugins-linux-%s-%s.tgz",
			o.GitHubMirror, o.CNI, o.Arch, o.CNI)},
	}
}
