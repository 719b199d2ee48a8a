package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/containerdtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
)

// `sysext create containerd` downloads the containerd release tarball and runc from a stand-in
// of GitHub (made from the real containerd 2.1.5 and Debian's runc), checks both, and writes
// the bakery's containerd sysext: the real binaries in /usr/bin (containerd says its version),
// Flatcar's config.toml importing /etc/containerd/conf.d, the unit and its Upholds drop-in;
// `sysext inspect` says Flatcar would merge it. A tampered tarball is refused, nothing written.
func TestSysextCreateContainerd(t *testing.T) {
	testutil.RequireTools(t, "unsquashfs", "runc")
	bin := registrytest.ContainerdDir(t)
	runc, _ := exec.LookPath("runc")
	srv := fetchtest.NewServer(t)
	v := registrytest.ContainerdVersion
	rel := containerdtest.Publish(t, srv, containerd.Options{Version: v}, bin, runc)
	dir := t.TempDir()
	out := filepath.Join(dir, "ctrd.raw")
	args := []string{"sysext", "create", "containerd", "--containerd-version", v, "--cache-dir", filepath.Join(dir, "cache"), "--output-file", out}
	res := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"FLATCAR_CAPO_GITHUB_MIRROR=" + srv.URL}}).MustSucceed(t)
	if !strings.Contains(res.Stdout, "/etc/extensions/containerd-flatcar.raw -> /dev/null") || !strings.Contains(res.Stdout, "/opt/extensions/containerd/containerd-"+v+"-x86-64.raw") {
		t.Errorf("create report:\n%s", res.Stdout)
	}
	tree := filepath.Join(dir, "tree")
	testutil.MustRun(t, "unsquashfs", "-d", tree, out)
	if b, err := exec.Command(filepath.Join(tree, "usr/bin/containerd"), "--version").CombinedOutput(); err != nil || !strings.Contains(string(b), "v"+v) {
		t.Errorf("the sysext's containerd --version: %v %s", err, b)
	}
	if b, _ := os.ReadFile(filepath.Join(tree, "usr/bin/runc")); string(b) != string(rel.Runc) {
		t.Error("usr/bin/runc is not the served runc")
	}
	for p, want := range map[string]string{
		"usr/share/containerd/config.toml":                                      `imports = ["/etc/containerd/conf.d/*.toml"]`,
		"usr/lib/systemd/system/containerd.service":                             "ExecStart=/usr/bin/containerd --config ${CONTAINERD_CONFIG}",
		"usr/lib/systemd/system/multi-user.target.d/10-containerd-service.conf": "Upholds=containerd.service",
		"usr/lib/extension-release.d/extension-release.containerd":              "SYSEXT_VERSION_ID=" + v,
	} {
		if b, err := os.ReadFile(filepath.Join(tree, p)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q: %v\n%s", p, want, err, b)
		}
	}
	for _, b := range []string{"ctr", "containerd-shim-runc-v2"} {
		if fi, err := os.Stat(filepath.Join(tree, "usr/bin", b)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("usr/bin/%s: %v", b, err)
		}
	}
	testutil.Run(t, "sysext", "inspect", out, "--name", "containerd").MustSucceed(t)

	// A tarball that is not the published one: exit 1, the checksum file named, no sysext.
	srv.Put(rel.TarballPath, append(append([]byte{}, rel.Tarball...), 0))
	bad := filepath.Join(dir, "bad.raw")
	testutil.Run(t, "sysext", "create", "containerd", "--containerd-version", v, "--github-mirror", srv.URL,
		"--cache-dir", filepath.Join(dir, "cache2"), "--output-file", bad).MustFail(t, 1, "sha256 mismatch", ".sha256sum")
	if _, err := os.Stat(bad); err == nil {
		t.Error("a sysext was written from a tampered tarball")
	}
	// Usage: no version, or the Kubernetes sysext's flags.
	testutil.Run(t, "sysext", "create", "containerd").MustFail(t, 2, "--containerd-version")
	testutil.Run(t, "sysext", "create", "--containerd-version", v, "--kubernetes-version", "v1.33.4").MustFail(t, 2, "sysext create containerd")
}
