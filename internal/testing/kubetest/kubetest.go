// Package kubetest serves a Kubernetes download mirror on 127.0.0.1 for tests: small stand-in
// executables (shell scripts) for kubeadm, kubelet (keeps running, as a daemon does) and
// kubectl, crictl and CNI plugin tarballs, each with a correct .sha256, and the version marker
// files release/stable.txt and release/stable-1.NN.txt, laid out like dl.k8s.io/release and
// github.com releases so --kubernetes-mirror/--github-mirror point at it.
package kubetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// Mirror is the test server: a fetchtest.Server holding every file and its .sha256.
type Mirror struct {
	*fetchtest.Server
	Options kubernetes.Options // versions and arch it serves; Mirror/GitHubMirror point here
	real    map[string][]byte  // NewReal's files by payload name; nil: the stand-ins (Content)
}

// Version is the Kubernetes version the mirror serves unless told otherwise; its stable.txt
// names it, so a build with the default --kubernetes-version stable gets it.
const Version = "v1.33.4"

// Crictl is the crictl version that goes with Version by default.
const Crictl = "v1.33.0"

// New starts a mirror for o's versions (Version and its defaults when empty), closed when the test ends.
func New(t testing.TB, o kubernetes.Options) *Mirror {
	m := &Mirror{Server: fetchtest.NewServer(t)}
	m.NoRange = true // a retry downloads the whole file again: what the fault tests expect
	o.Mirror, o.GitHubMirror = m.URL+"/release", m.URL
	if o.Kubernetes == "" {
		o.Kubernetes = Version
	}
	if err := o.Validate(); err != nil {
		panic(err)
	}
	m.Options = o
	m.put(o)
	_, minor, _ := kubernetes.MinorOf(o.Kubernetes)
	m.Put("/release/stable.txt", []byte(o.Kubernetes+"\n"))
	m.Put(fmt.Sprintf("/release/stable-1.%d.txt", minor), []byte(o.Kubernetes+"\n"))
	return m
}

// put serves o's files, each with its .sha256.
func (m *Mirror) put(o kubernetes.Options) {
	for _, f := range o.Files() {
		data := Content(o, f.Name)
		m.Put(m.path(f), data)
		m.putSHA256(m.path(f), data, false)
	}
}

// putSHA256 publishes the .sha256 of the file at path: dl.k8s.io publishes the bare digest,
// GitHub releases "digest  name"; wrong publishes BadSHA256 instead.
func (m *Mirror) putSHA256(path string, data []byte, wrong bool) {
	s := sha256.Sum256(data)
	sum := hex.EncodeToString(s[:])
	if wrong {
		sum = BadSHA256
	}
	if !strings.HasPrefix(path, "/release/") {
		sum += "  " + path[strings.LastIndex(path, "/")+1:] + "\n"
	}
	m.Put(path+".sha256", []byte(sum))
}

// AddVersion serves the files of another Kubernetes version (crictl and CNI fitting it) too.
func (m *Mirror) AddVersion(v string) kubernetes.Options {
	o := m.Options
	o.Kubernetes, o.Crictl, o.CNI = v, "", ""
	if err := o.Validate(); err != nil {
		panic(err)
	}
	m.put(o)
	return o
}

// SetMarker serves content as release/NAME (stable.txt, stable-1.35.txt); nil removes it.
func (m *Mirror) SetMarker(name string, content []byte) {
	if content == nil {
		m.Remove("/release/" + name)
		return
	}
	m.Put("/release/"+name, content)
}

// KubernetesMirror is the --kubernetes-mirror value.
func (m *Mirror) KubernetesMirror() string { return m.URL + "/release" }

// GitHubMirror is the --github-mirror value.
func (m *Mirror) GitHubMirror() string { return m.URL }

// Args are the build flags that select this mirror and its versions.
func (m *Mirror) Args() []string {
	return []string{"--kubernetes-mirror", m.KubernetesMirror(), "--github-mirror", m.GitHubMirror(),
		"--kubernetes-version", m.Options.Kubernetes, "--crictl-version", m.Options.Crictl, "--cni-version", m.Options.CNI}
}

func (m *Mirror) path(f kubernetes.File) string { return strings.TrimPrefix(f.URL, m.URL) }

// File returns the served file for a payload name (bin/kubelet, crictl.tar.gz, ...).
func (m *Mirror) File(name string) kubernetes.File {
	for _, f := range m.Options.Files() {
		if f.Name == name {
			return f
		}
	}
	panic("kubetest: no file " + name)
}

// SHA256 is the hex sha256 of a served file.
func (m *Mirror) SHA256(name string) string {
	s := sha256.Sum256(m.content(name))
	return hex.EncodeToString(s[:])
}

// WrongSHA256 makes the mirror publish a wrong .sha256 for name (true) or the right one.
func (m *Mirror) WrongSHA256(name string, wrong bool) {
	m.putSHA256(m.path(m.File(name)), m.content(name), wrong)
}

func (m *Mirror) content(name string) []byte {
	if m.real != nil {
		return m.real[name]
	}
	return Content(m.Options, name)
}

// BadSHA256 is the digest served when WrongSHA256 is on.
const BadSHA256 = "0000000000000000000000000000000000000000000000000000000000000bad"

// Requests are the paths asked for so far.
func (m *Mirror) Requests() []string {
	var paths []string
	for _, r := range m.Server.Requests("") {
		paths = append(paths, r.Path)
	}
	return paths
}

// Script is the stand-in executable for a Kubernetes binary; kubelet runs until stopped.
func Script(name, version string) []byte {
	body := fmt.Sprintf("echo '%s version %s (flatcar-capo test stand-in)'\n", name, version)
	if name == "kubeadm" {
		body = kubeadmImages(version) + body
	}
	if name == "kubelet" {
		body = fmt.Sprintf("case \"$1\" in --version) echo 'Kubernetes %s'; exit 0;; esac\n"+
			"echo 'kubelet stand-in %s running'\nwhile :; do sleep 3600; done\n", version, version)
	}
	return []byte("#!/bin/sh\n# flatcar-capo test stand-in for " + name + "\n" + body)
}

// CNIPlugins are the plugin names in the stand-in CNI tarball.
var CNIPlugins = []string{"bridge", "host-local", "loopback", "portmap"}

// Content is the deterministic content of a payload name for o's versions.
func Content(o kubernetes.Options, name string) []byte {
	switch name {
	case "bin/kubeadm", "bin/kubelet", "bin/kubectl":
		return Script(strings.TrimPrefix(name, "bin/"), o.Kubernetes)
	case "crictl.tar.gz":
		return testutil.TarGz(map[string][]byte{"crictl": Script("crictl", o.Crictl)})
	case "cni-plugins.tgz":
		files := map[string][]byte{}
		for _, p := range CNIPlugins {
			files["./"+p] = Script(p, o.CNI)
		}
		return testutil.TarGz(files)
	}
	panic("kubetest: no content for " + name)
}

// Image tags kubeadm v1.33 lists besides the version's own (what the stand-in kubeadm answers).
const (
	PauseTag   = "3.10"
	EtcdTag    = "3.5.21-0"
	coreDNSTag = "v1.12.0"
)

// KubeadmImages is what `kubeadm config images list --kubernetes-version version
// [--image-repository repo]` prints, in kubeadm's order (coredns moves to repo/coredns when a
// repository is given, as kubeadm does).
func KubeadmImages(version, repo string) []string {
	coredns := "registry.k8s.io/coredns/coredns"
	if repo == "" {
		repo = "registry.k8s.io"
	} else {
		coredns = repo + "/coredns"
	}
	return []string{repo + "/kube-apiserver:" + version, repo + "/kube-controller-manager:" + version,
		repo + "/kube-scheduler:" + version, repo + "/kube-proxy:" + version,
		coredns + ":" + coreDNSTag, repo + "/pause:" + PauseTag, repo + "/etcd:" + EtcdTag}
}

// kubeadmImages is the stand-in kubeadm's `config images list`: only for its own version (a
// real kubeadm refuses versions outside its skew; the stand-in refuses any other).
func kubeadmImages(version string) string {
	return fmt.Sprintf(`if [ "$1 $2 $3" = "config images list" ]; then
  shift 3; v=; repo=registry.k8s.io; coredns=registry.k8s.io/coredns/coredns
  while [ $# -gt 0 ]; do
    case "$1" in
      --kubernetes-version) v=$2; shift 2;;
      --kubernetes-version=*) v=${1#*=}; shift;;
      --image-repository) repo=$2; coredns=$2/coredns; shift 2;;
      --image-repository=*) repo=${1#*=}; coredns=$repo/coredns; shift;;
      *) echo "unknown flag: $1" >&2; exit 1;;
    esac
  done
  if [ "$v" != %[1]s ]; then echo "this version of kubeadm only supports deploying clusters with the control plane version >= %[1]s. Current version: $v" >&2; exit 1; fi
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do echo "$repo/$c:$v"; done
  echo "$coredns:%[2]s"; echo "$repo/pause:%[3]s"; echo "$repo/etcd:%[4]s"
  exit 0
fi
`, version, coreDNSTag, PauseTag, EtcdTag)
}
