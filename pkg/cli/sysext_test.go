package cli_test

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// `sysext create` downloads from a local mirror (sha256-checked), writes the bakery layout, and
// `sysext inspect` of the result says Flatcar would merge it.
func TestSysextCreateAndInspect(t *testing.T) {
	testutil.RequireTools(t, "unsquashfs")
	m := kubetest.New(t, kubernetes.Options{Kubernetes: "v1.33.4"})
	dir := t.TempDir()
	args := append([]string{"sysext", "create", "--cache-dir", filepath.Join(dir, "cache"), "-o", "json"}, m.Args()...)
	res := testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: dir}).MustSucceed(t)
	var created struct {
		Path, SHA512, Compression string
		Files                     []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &created); err != nil {
		t.Fatalf("create -o json: %v\n%s", err, res.Stdout)
	}
	out := filepath.Join(dir, "kubernetes-v1.33.4-x86-64.raw") // the default --output-file
	if created.Path != "kubernetes-v1.33.4-x86-64.raw" || len(created.SHA512) != 128 || created.Compression != "gzip" {
		t.Errorf("create report: %+v", created)
	}
	if b, err := exec.Command("unsquashfs", "-cat", out, "usr/bin/kubelet").Output(); err != nil || string(b) != string(kubetest.Content(m.Options, "bin/kubelet")) {
		t.Errorf("usr/bin/kubelet is not the mirror's kubelet: %v\n%s", err, b)
	}
	ls, err := exec.Command("unsquashfs", "-lls", out).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"root/root", "squashfs-root/usr/local/bin/cni/portmap", "squashfs-root/usr/bin/crictl", "squashfs-root/usr/bin/kubeadm"} {
		if !strings.Contains(string(ls), want) {
			t.Errorf("unsquashfs -lls lacks %s:\n%s", want, ls)
		}
	}
	if strings.Contains(string(ls), "/0 ") || strings.Count(string(ls), "root/root") < 15 {
		t.Errorf("not every entry is root-owned:\n%s", ls)
	}

	txt := testutil.Run(t, "sysext", "inspect", out).MustSucceed(t).Stdout
	for _, want := range []string{"Name:        kubernetes (linked as /etc/extensions/kubernetes.raw)", "ID=_any", "ARCHITECTURE=x86-64",
		"-rwxr-xr-x 0/0", "/usr/bin/kubelet", "Would merge: yes, against Flatcar's constants", "all file data decompressed"} {
		if !strings.Contains(txt, want) {
			t.Errorf("inspect lacks %q:\n%s", want, txt)
		}
	}
	var rep struct {
		Name       string            `json:"name"`
		WouldMerge bool              `json:"wouldMerge"`
		Release    map[string]string `json:"extensionRelease"`
		Problems   []string          `json:"problems"`
		Host       struct{ Source string }
	}
	j := testutil.Run(t, "sysext", "inspect", out, "-o", "json").MustSucceed(t).Stdout
	if err := json.Unmarshal([]byte(j), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.WouldMerge || rep.Name != "kubernetes" || rep.Release["EXTENSION_RELOAD_MANAGER"] != "1" || rep.Problems == nil || len(rep.Problems) != 0 {
		t.Errorf("inspect -o json: %s", j)
	}
	// On an arm64 host, or linked under another name, it would not merge: exit 1 with the reason.
	testutil.Run(t, "sysext", "inspect", out, "--arch", "arm64").MustFail(t, 1, "Would merge: NO", "ARCHITECTURE=x86-64, but the host is arm64")
	testutil.Run(t, "sysext", "inspect", out, "--name", "k8s").MustFail(t, 1, "linked as k8s.raw it needs usr/lib/extension-release.d/extension-release.k8s")
	osr := filepath.Join(dir, "os-release")
	os.WriteFile(osr, []byte("ID=debian\nVERSION_ID=12\n"), 0o644)
	testutil.Run(t, "sysext", "inspect", out, "--os-release", osr).MustSucceed(t)

	// A second create reuses the cache: the mirror sees .sha256 requests only.
	before := len(m.Requests())
	testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--output-file", "again.raw"), Dir: dir}).MustSucceed(t)
	for _, r := range m.Requests()[before:] {
		if !strings.HasSuffix(r, ".sha256") {
			t.Errorf("second create downloaded %s again", r)
		}
	}
}

// A download whose .sha256 does not match is refused, and nothing is written.
func TestSysextCreateRefusesBadChecksum(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{Kubernetes: "v1.33.4"})
	m.WrongSHA256("bin/kubelet", true)
	dir := t.TempDir()
	out := filepath.Join(dir, "k.raw")
	args := append([]string{"sysext", "create", "--cache-dir", filepath.Join(dir, "cache"), "--output-file", out}, m.Args()...)
	testutil.Run(t, args...).MustFail(t, 1, "sha256 mismatch for kubelet")
	if entries, _ := os.ReadDir(dir); len(entries) > 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// Offline: --binaries DIR with files downloaded elsewhere (the build payload layout).
func TestSysextCreateFromBinaries(t *testing.T) {
	dir := t.TempDir()
	o := kubernetes.Options{Kubernetes: "v1.33.4"}
	o.Validate()
	for _, n := range []string{"bin/kubelet", "bin/kubeadm", "bin/kubectl", "cni-plugins.tgz"} {
		p := filepath.Join(dir, "payload", n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, kubetest.Content(o, n), 0o755)
	}
	out := filepath.Join(dir, "kubernetes.raw")
	res := testutil.Run(t, "sysext", "create", "--kubernetes-version", "v1.33.4", "--arch", "arm64", "--binaries", filepath.Join(dir, "payload"),
		"--release-id", "flatcar", "--compression", "zstd", "--output-file", out).MustSucceed(t)
	if !strings.Contains(res.Stdout, "zstd") || !strings.Contains(res.Stdout, "/opt/extensions/kubernetes/kubernetes-v1.33.4-arm64.raw") {
		t.Errorf("create output:\n%s", res.Stdout)
	}
	txt := testutil.Run(t, "sysext", "inspect", out, "--arch", "arm64").MustSucceed(t).Stdout
	if !strings.Contains(txt, "ID=flatcar and SYSEXT_LEVEL=1.0 match") || !strings.Contains(txt, "/usr/local/bin/cni/bridge") {
		t.Errorf("inspect:\n%s", txt)
	}
	os.Remove(filepath.Join(dir, "payload", "bin", "kubeadm"))
	testutil.Run(t, "sysext", "create", "--kubernetes-version", "v1.33.4", "--binaries", filepath.Join(dir, "payload"), "--output-file", out+"2").
		MustFail(t, 1, "has no kubeadm", "dl.k8s.io/release/v1.33.4/bin/linux/amd64/kubeadm")
}

func TestSysextUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sysext", "create"}, "--kubernetes-version is required"},
		{[]string{"sysext", "create", "--kubernetes-version", "1.33.4"}, "e.g. v1.33.4"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--arch", "s390x"}, "use amd64 (x86-64) or arm64"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--compression", "xz"}, "gzip or zstd"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--compression", "zstd", "--compression-level", "3"}, "--compression-level is gzip's"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--compression-level", "0"}, "1 (fastest) to 9"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--release-id", "debian"}, "_any or flatcar"},
		{[]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--kubernetes-mirror", "ftp://x"}, "want an http(s) URL"},
		{[]string{"sysext", "inspect"}, "needs 1 argument(s) (FILE)"},
		{[]string{"sysext", "inspect", "x.raw", "--name", "../etc"}, "invalid sysext name"},
	} {
		testutil.RunCmd(t, testutil.Cmd{Args: c.args, Dir: dir}).MustFail(t, 2, c.want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("usage errors wrote %v", entries)
	}
}

// Sysexts Flatcar would refuse, made by the real mksquashfs, and damaged files: `sysext inspect`
// exits 1 naming the problem and the fix.
func TestSysextInspectRefusesBadSysexts(t *testing.T) {
	testutil.RequireTools(t, "mksquashfs")
	dir := t.TempDir()
	mk := func(name string, files map[string]string) string {
		root := filepath.Join(dir, name+".d")
		for p, c := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
			os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
		}
		out := filepath.Join(dir, name)
		testutil.MustRun(t, "mksquashfs", root, out, "-noappend", "-all-root", "-quiet", "-no-progress")
		return out
	}
	rel := "usr/lib/extension-release.d/extension-release."
	// Incompressible, so that the image is far larger than mksquashfs' 4 KiB padding.
	random := make([]byte, 300<<10)
	rand.Read(random)
	kubelet := string(random)
	noRelease := mk("kubernetes.raw", map[string]string{"usr/bin/kubelet": kubelet})
	os.Rename(noRelease, filepath.Join(dir, "norelease.raw"))
	mismatched := mk("kubernetes-v1.33.4-x86-64.raw", map[string]string{"usr/bin/kubelet": kubelet, rel + "k8s": "ID=_any\n"})
	osRelease := mk("kubernetes.raw", map[string]string{"usr/bin/kubelet": kubelet, rel + "kubernetes": "ID=_any\n", "usr/lib/os-release": "ID=flatcar\n"})
	good := mk("good.raw", map[string]string{"usr/bin/kubelet": kubelet, rel + "good": "ID=_any\n"})
	data, _ := os.ReadFile(good)
	truncated := filepath.Join(dir, "truncated.raw")
	os.WriteFile(truncated, data[:len(data)*2/3], 0o644)

	if res := testutil.Run(t, "sysext", "inspect", good).MustSucceed(t); strings.Contains(res.Stdout, "not owned by root") {
		t.Errorf("an -all-root image reported as not root-owned:\n%s", res.Stdout)
	}
	// Made without -all-root by a user: merged, but worth a note.
	userTree := filepath.Join(dir, "user.d")
	os.MkdirAll(filepath.Join(userTree, "usr/lib/extension-release.d"), 0o755)
	os.WriteFile(filepath.Join(userTree, rel+"user"), []byte("ID=_any\n"), 0o644)
	os.Chown(filepath.Join(userTree, rel+"user"), 1000, 1000)
	userImg := filepath.Join(dir, "user.raw")
	testutil.MustRun(t, "mksquashfs", userTree, userImg, "-noappend", "-quiet", "-no-progress")
	testutil.Run(t, "sysext", "inspect", userImg).MustSucceed(t)
	if testutil.HaveRoot(t, "the note on a file owned by uid 1000 (only root can chown it)") {
		if res := testutil.Run(t, "sysext", "inspect", userImg).MustSucceed(t); !strings.Contains(res.Stdout, "not owned by root, e.g. /usr/lib/extension-release.d/extension-release.user (1000:1000)") {
			t.Errorf("a user-owned file is not noted:\n%s", res.Stdout)
		}
	}
	testutil.Run(t, "sysext", "inspect", filepath.Join(dir, "norelease.raw"), "--name", "kubernetes").
		MustFail(t, 1, "has no usr/lib/extension-release.d/extension-release.* file", "Would merge: NO")
	testutil.Run(t, "sysext", "inspect", mismatched).
		MustFail(t, 1, "it carries extension-release.k8s", "link it as k8s.raw")
	testutil.Run(t, "sysext", "inspect", osRelease).MustFail(t, 1, "ships usr/lib/os-release")
	testutil.Run(t, "sysext", "inspect", truncated).MustFail(t, 1, "truncated squashfs", "interrupted download")
	testutil.Run(t, "sysext", "inspect", filepath.Join(dir, "missing.raw")).MustFail(t, 1, "no such file")
	// JSON still describes a refused image, for scripts.
	res := testutil.Run(t, "sysext", "inspect", osRelease, "-o", "json").MustFail(t, 1)
	var rep struct {
		WouldMerge   bool `json:"wouldMerge"`
		HasOSRelease bool `json:"hasOsRelease"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil || rep.WouldMerge || !rep.HasOSRelease {
		t.Errorf("json: %v %s", err, res.Stdout)
	}
}

// sysext create and manifests take stable and minors as build does, resolved through the mirror.
func TestKubernetesVersionFormsSysextAndManifests(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	dir := t.TempDir()
	testutil.RunCmd(t, testutil.Cmd{Dir: dir, Args: []string{"sysext", "create", "--kubernetes-version", "1.33", "--cache-dir", filepath.Join(dir, "cache"),
		"--kubernetes-mirror", m.KubernetesMirror(), "--github-mirror", m.GitHubMirror()}}).MustSucceed(t)
	if _, err := os.Stat(filepath.Join(dir, "kubernetes-"+kubetest.Version+"-x86-64.raw")); err != nil {
		t.Errorf("sysext create --kubernetes-version 1.33 did not name the file after %s: %v", kubetest.Version, err)
	}
	m.SetMarker("stable.txt", []byte("v1.36.1\n"))
	r := testutil.Run(t, "manifests", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).MustSucceed(t)
	if !strings.Contains(r.Stdout, "version: v1.36.1") {
		t.Errorf("manifests --kubernetes-version stable did not use v1.36.1")
	}
	m.SetMarker("stable.txt", []byte("garbage\n"))
	testutil.Run(t, "manifests", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).
		MustFail(t, 1, m.KubernetesMirror()+"/stable.txt", "not a release tag")
	testutil.Run(t, "manifests", "--kubernetes-version", "v1.34.1", "--kubernetes-mirror", "http://127.0.0.1:9/release").MustSucceed(t)
}
