package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// The versions scripts/install-kubernetes.sh builds (crictl: scripts/install-containerd.sh).
const (
	RealVersion = "v1.34.4"
	realCrictl  = "v1.34.0"
	realCNI     = "v1.7.1"
)

// RealDir is scripts/install-kubernetes.sh's output directory: kubeadm, kubelet, kubectl, the
// control-plane binaries, etcd, coredns, pause and cni/{bridge,host-local,loopback,portmap}.
// A build still running (`make test` starts it in the background while the other tests run)
// is waited for, by its lock, for at most an hour. The test skips (fails in strict mode) when
// the binaries are missing after that.
func RealDir(t testing.TB) string {
	t.Helper()
	return realDir(t, append(slices.Clone(nodeBinaries), "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"kube-proxy", "etcd", "coredns", "pause"))
}

// RealNodeDir is RealDir for what a node's sysext or /opt/bin carries (kubeadm, kubelet,
// kubectl, the CNI plugins): it returns once those are there, without waiting for the rest
// of a running build (the script builds them first and installs each file by rename).
func RealNodeDir(t testing.TB) string {
	t.Helper()
	return realDir(t, nodeBinaries)
}

var nodeBinaries = []string{"kubeadm", "kubelet", "kubectl", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"}

func realDir(t testing.TB, need []string) string {
	t.Helper()
	top := testutil.InstallCache("kubernetes")
	dir := filepath.Join(top, RealVersion)
	missing := func() error {
		for _, b := range need {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return err
			}
		}
		return nil
	}
	waitForBuild(t, top, func() bool { return missing() == nil })
	if err := missing(); err != nil {
		if log, lerr := os.ReadFile(filepath.Join(top, buildLog)); lerr == nil {
			t.Logf("the last lines of %s:\n%s", filepath.Join(top, buildLog), tail(string(log), 30))
		}
		testutil.RequireEnv(t, err, "Kubernetes "+RealVersion+" built from source (run scripts/install-kubernetes.sh)")
	}
	return dir
}

// BuildLock and BuildLog are scripts/install-kubernetes.sh's lock (held while it runs) and, when
// scripts/install-deps.sh starts it in the background, its output, both in the cache's kubernetes/.
const (
	buildLock = ".build.lock"
	buildLog  = "build.log"
)

// waitForBuild waits, for at most an hour, while scripts/install-kubernetes.sh holds its lock
// in top and ready says no.
func waitForBuild(t testing.TB, top string, ready func() bool) {
	t.Helper()
	testutil.WaitForScript(t, "scripts/install-kubernetes.sh", filepath.Join(top, buildLock), filepath.Join(top, buildLog), ready)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// NewReal serves the real binaries as users' mirrors do: kubeadm, kubelet and kubectl from bin
// (RealDir) in dl.k8s.io's layout with their .sha256, crictl (from crictlDir, what
// scripts/install-containerd.sh built) and the CNI plugins as GitHub release tarballs.
func NewReal(t testing.TB, bin, crictlDir string) *Mirror {
	t.Helper()
	m := &Mirror{Server: fetchtest.NewServer(t)}
	o := kubernetes.Options{Kubernetes: RealVersion, Crictl: realCrictl, CNI: realCNI, Mirror: m.URL + "/release", GitHubMirror: m.URL}
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
