package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// The at-boot sysext flavor with an arm64 sysext: the file nodes download, its URL, the link's
// target and the verification hash all name the arm64 file; a source naming another
// architecture (--arch, the file's name, the build record) is refused before anything is written.
func TestManifestsSysextArm64(t *testing.T) {
	dir := t.TempDir()
	o := kubernetes.Options{Kubernetes: "v1.34.1"}
	o.Validate()
	for _, n := range []string{"bin/kubelet", "bin/kubeadm", "bin/kubectl", "cni-plugins.tgz"} {
		p := filepath.Join(dir, "payload", n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, kubetest.Content(o, n), 0o755)
	}
	arm := filepath.Join(dir, "kubernetes-v1.34.1-arm64.raw")
	testutil.Run(t, "sysext", "create", "--kubernetes-version", "v1.34.1", "--arch", "arm64", "--binaries", filepath.Join(dir, "payload"),
		"--output-file", arm).MustSucceed(t)
	sum := testutil.SHA512File(t, arm)

	base := []string{"manifests", "--flavor", "sysext", "--kubernetes-version", "v1.34.1", "--sysext-url", "http://10.0.0.5/ext"}
	m := testutil.Run(t, append(base, "--sysext", arm)...).MustSucceed(t).Stdout
	for _, want := range []string{
		"path: /opt/extensions/kubernetes/kubernetes-v1.34.1-arm64.raw",
		"url: http://10.0.0.5/ext/kubernetes-v1.34.1-arm64.raw",
		"target: /opt/extensions/kubernetes/kubernetes-v1.34.1-arm64.raw",
		"sum: " + sum,
	} {
		if c := strings.Count(m, want); c != 2 { // control plane and workers
			t.Errorf("%d times %q in the manifest, want 2", c, want)
		}
	}
	if strings.Contains(m, "x86-64") {
		t.Errorf("an arm64 manifest names x86-64:\n%s", m)
	}
	lint := testutil.RunCmd(t, testutil.Cmd{Args: []string{"lint", "-"}, Stdin: m}).MustSucceed(t)
	if !strings.Contains(lint.Stdout, "0 error(s), 0 warning(s)") {
		t.Errorf("lint:\n%s", lint.Stdout)
	}
	// --arch alone names the file (the hash then comes from the server or clusterctl).
	if m := testutil.Run(t, "manifests", "--flavor", "sysext", "--arch", "aarch64").MustSucceed(t).Stdout; !strings.Contains(m, "url: ${KUBERNETES_SYSEXT_URL:=https://extensions.flatcar.org/extensions}/kubernetes-${KUBERNETES_VERSION}-arm64.raw") {
		t.Errorf("--arch aarch64 without a version:\n%s", m)
	}

	out := filepath.Join(dir, "cluster.yaml")
	testutil.Run(t, append(base, "--sysext", arm, "--arch", "amd64", "--output-file", out)...).
		MustFail(t, 2, "--arch is x86-64 but the ARCHITECTURE of --sysext "+arm+" is arm64")
	renamed := filepath.Join(dir, "kubernetes-v1.34.1-x86-64.raw")
	data, _ := os.ReadFile(arm)
	os.WriteFile(renamed, data, 0o644)
	testutil.Run(t, append(base, "--sysext", renamed, "--output-file", out)...).
		MustFail(t, 2, "the ARCHITECTURE of --sysext "+renamed+" is arm64 but the name of --sysext "+renamed+" is x86-64")
	rec := filepath.Join(dir, "img.qcow2.build.json")
	b, _ := json.Marshal(map[string]any{"imageName": "flatcar-stable-capo", "arch": "amd64", "kubernetesVersion": "v1.34.1"})
	os.WriteFile(rec, b, 0o644)
	testutil.Run(t, append(base, "--sysext", arm, "--from-record", rec, "--output-file", out)...).
		MustFail(t, 2, "--from-record (arch amd64) is x86-64")
	testutil.Run(t, append(base, "--sysext", arm, "--kubernetes-version", "v1.33.4", "--output-file", out)...).
		MustFail(t, 2, "is not kubernetes-v1.33.4-arm64.raw")
	// The image of the other flavors carries its architecture: FLATCAR_CAPO_ARCH set for build in
	// the same job does not stop them.
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"manifests", "--flavor", "baked"}, Env: []string{"FLATCAR_CAPO_ARCH=arm64"}}).MustSucceed(t)
	testutil.Run(t, append(base, "--arch", "s390x")...).MustFail(t, 2, "--arch", "unknown architecture")
	notSysext := filepath.Join(dir, "kubernetes-v1.34.1-arm64.txt")
	os.WriteFile(notSysext, []byte("hello"), 0o644)
	testutil.Run(t, append(base, "--sysext", notSysext)...).MustFail(t, 2, "--sysext "+notSysext)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused manifests wrote %s", out)
	}
}
