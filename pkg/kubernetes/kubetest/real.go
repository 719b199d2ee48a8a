package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// The versions scripts/install-kubernetes.sh builds (crictl: scripts/install-containerd.sh).
const (
	RealVersion = "v1.34.4"
	RealCrictl  = "v1.34.0"
	RealCNI     = "v1.7.1"
)

// RealDir is scripts/install-kubernetes.sh's output directory: kubeadm, kubelet, kubectl, the
// control-plane binaries, etcd, coredns, pause and cni/{bridge,host-local,loopback,portmap}.
// The test skips (fails in strict mode) when they are missing.
func RealDir(t testing.TB) string {
	t.Helper()
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(cache, "flatcar-capo", "kubernetes", RealVersion)
	for _, b := range []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"kube-proxy", "etcd", "coredns", "pause", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			testutil.RequireEnv(t, err, "Kubernetes "+RealVersion+" built from source (run scripts/install-kubernetes.sh)")
		}
	}
	return dir
}

// NewReal serves the real binaries as users' mirrors do: kubeadm, kubelet and kubectl from bin
// (RealDir) in dl.k8s.io's layout with their .sha256, crictl (from crictlDir, what
// scripts/install-containerd.sh built) and the CNI plugins as GitHub release tarballs.
func NewReal(t testing.TB, bin, crictlDir string) *Mirror {
	t.Helper()
	m := &Mirror{Server: fetchtest.NewServer(t)}
	o := kubernetes.Options{Kubernetes: RealVersion, Crictl: RealCrictl, CNI: RealCNI, Mirror: m.URL + "/release", GitHubMirror: m.URL}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	m.Options = o
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		return b
	}
	m.real = map[string][]byte{
		"bin/kubeadm":   read(filepath.Join(bin, "kubeadm")),
		"bin/kubelet":   read(filepath.Join(bin, "kubelet")),
		"bin/kubectl":   read(filepath.Join(bin, "kubectl")),
		"crictl.tar.gz": testutil.TarGz(map[string][]byte{"crictl": read(filepath.Join(crictlDir, "crictl"))}),
	}
	cni := map[string][]byte{}
	for _, p := range CNIPlugins {
		cni["./"+p] = read(filepath.Join(bin, "cni", p))
	}
	m.real["cni-plugins.tgz"] = testutil.TarGz(cni)
	for _, f := range o.Files() {
		m.Put(m.path(f), m.real[f.Name])
		m.putSHA256(m.path(f), m.real[f.Name], false)
	}
	_, minor, _ := kubernetes.MinorOf(o.Kubernetes)
	m.Put("/release/stable.txt", []byte(o.Kubernetes+"\n"))
	m.Put(fmt.Sprintf("/release/stable-1.%d.txt", minor), []byte(o.Kubernetes+"\n"))
	return m
}
