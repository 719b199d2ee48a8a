package imagebuild_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// egressRecorder is an HTTP(S) proxy on 127.0.0.1 that answers every request 502 and records
// it: with HTTP_PROXY/HTTPS_PROXY pointing at it, any request for a host other than 127.0.0.1
// (which Go never proxies) shows up here, before any DNS lookup.
type egressRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newEgressRecorder(t *testing.T) *egressRecorder {
	r := &egressRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.Host)
		r.mu.Unlock()
		http.Error(w, "no egress in this test", http.StatusBadGateway)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *egressRecorder) env() []string {
	return []string{"HTTP_PROXY=" + r.URL, "HTTPS_PROXY=" + r.URL, "http_proxy=" + r.URL, "https_proxy=" + r.URL, "NO_PROXY=", "no_proxy="}
}

func (r *egressRecorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// The bakery's link name kubernetes.raw says nothing of the version: with --sysext and no
// --kubernetes-version, build takes the version from inside the sysext (its extension-release
// SYSEXT_VERSION_ID), names the image after it and sends no request off 127.0.0.1 (the default
// mirror, dl.k8s.io, is never asked for stable.txt); a --kubernetes-version that disagrees is
// exit 2 with nothing written.
func TestBuildSysextVersionFromInside(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	mirror := kubetest.New(t, kubernetes.Options{Kubernetes: "v1.32.3"}) // not the mirror's default: the name cannot come from a default
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	raw := filepath.Join(dir, "kubernetes.raw")
	testutil.Run(t, append([]string{"sysext", "create", "--output-file", raw}, mirror.Args()...)...).MustSucceed(t)
	mirror.Close() // from here on nothing may be downloaded

	egress := newEgressRecorder(t)
	build := func(out string, extra ...string) testutil.Result {
		args := append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
			"--sysext", raw, "--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out}, extra...)
		return testutil.RunCmd(t, testutil.Cmd{Args: args, Env: egress.env()})
	}

	out := filepath.Join(dir, "out")
	res := build(out).MustSucceed(t)
	artifact := filepath.Join(out, "flatcar-stable-4459.2.0-kube-v1.32.3-sysext.qcow2")
	if _, err := os.Stat(artifact); err != nil {
		t.Fatalf("the image is not named after the sysext's Kubernetes v1.32.3: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	if rec := readRecord(t, artifact); rec.KubernetesVersion != "v1.32.3" {
		t.Errorf("record says Kubernetes %q, want the sysext's v1.32.3", rec.KubernetesVersion)
	}
	if !strings.Contains(res.Stdout, "--kubernetes-version v1.32.3") {
		t.Errorf("the manifests command does not ask for the sysext's version:\n%s", res.Stdout)
	}

	for _, c := range []struct{ flag, want string }{
		{"v1.33.4", "disagrees"}, {"1.33", "disagrees"}, {"v1.32.0", "disagrees"},
	} {
		o := filepath.Join(dir, "refused-"+c.flag)
		build(o, "--kubernetes-version", c.flag).MustFail(t, 2, "--kubernetes-version "+c.flag, c.want, "v1.32.3")
		if _, err := os.Stat(o); !os.IsNotExist(err) {
			t.Errorf("--kubernetes-version %s: refused, but %s was written (%v)", c.flag, o, err)
		}
	}
	// Agreeing versions are fine: the exact one and its minor; the plan says where the version came from.
	build(filepath.Join(dir, "minor"), "--kubernetes-version", "1.32", "--dry-run").MustSucceed(t)
	if plan := build(filepath.Join(dir, "plan"), "--dry-run").MustSucceed(t); !strings.Contains(plan.Stdout, "v1.32.3 (SYSEXT_VERSION_ID in extension-release.kubernetes of --sysext "+raw+")") {
		t.Errorf("the plan does not say the version came from inside the sysext:\n%s", plan.Stdout)
	}

	if seen := egress.requests(); len(seen) != 0 {
		t.Errorf("requests left 127.0.0.1: %v", seen)
	}
	// The recorder sees what does leave: a release lookup on the default server.
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"release", "--channel", "stable"}, Env: egress.env()})
	if len(egress.requests()) == 0 {
		t.Fatal("the egress recorder saw nothing of a release lookup on the default server: it proves nothing")
	}
}

// Preloading from a registry nobody can reach fails once, naming the fix, not once per image.
func TestBuildPreloadUnreachableRegistry(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	port, err := testutil.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("127.0.0.1:%d", port)
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--registry-mirror", "registry.k8s.io=http://" + dead}, mirror.Args()...)
	r := testutil.Run(t, args...).MustFail(t, 1, "cannot reach mirror "+dead, "for 7 image(s)", "--no-preload-images")
	if n := strings.Count(r.Stderr, "connection refused"); n != 1 {
		t.Errorf("the dial error is said %d times, want once:\n%s", n, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "flatcar-stable-4459.2.0-kube-"+kubetest.Version+"-sysext.qcow2")); err == nil {
		t.Error("an image was written although preloading failed")
	}
}

// Preloading through a proxy that refuses (CONNECT answered 403 Forbidden, as an air-gapped
// site's proxy answers registry.k8s.io) is every image unreachable alike: one message naming the
// proxy's refusal and the ways out (--registry-mirror, --images-file, --no-preload-images), not
// one bare "Forbidden" per image.
func TestBuildPreloadThroughRefusingProxy(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	mirror := kubetest.New(t, kubernetes.Options{}) // on 127.0.0.1, which Go never proxies
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	proxy := registrytest.StartRefusingProxy(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out}, mirror.Args()...)
	r := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"HTTPS_PROXY=http://" + proxy.Host, "HTTP_PROXY=http://" + proxy.Host}}).
		MustFail(t, 1, "cannot reach registry registry.k8s.io", "refused to connect", "403 Forbidden",
			"--registry-mirror registry.k8s.io=https://", "--images-file", "--no-preload-images")
	if n := strings.Count(r.Stderr, "cannot reach"); n != 1 {
		t.Errorf("%d 'cannot reach' in the error, want 1:\n%s", n, r.Stderr)
	}
	if !strings.Contains(strings.Join(proxy.Seen(), "\n"), "CONNECT registry.k8s.io:443") {
		t.Errorf("the build did not ask the proxy for registry.k8s.io: %v", proxy.Seen())
	}
	if _, err := os.Stat(filepath.Join(out, "flatcar-stable-4459.2.0-kube-"+kubetest.Version+"-sysext.qcow2")); err == nil {
		t.Error("an image was written although preloading failed")
	}
}
