package imagebuild_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// The sysext of the stand-in binaries (kubetest.Version) and of the real ones (kubetest.RealVersion).
const (
	sysextFile     = "kubernetes-" + kubetest.Version + "-x86-64.raw"
	realSysextFile = "kubernetes-" + kubetest.RealVersion + "-x86-64.raw"
)

// TestBuildSysextCLI runs `flatcar-capo build --method sysext` as users do, on a Flatcar-layout
// image (--base-image) with the Kubernetes downloads from a mirror on 127.0.0.1: the sysext made
// from the binaries, then a prebuilt one by URL with --keep-updates, then a damaged one. Checks
// are read from the output image (qcow2 -> raw -> ROOT -> e2fsck, debugfs) and the record.
func TestBuildSysextCLI(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	args := func(out string, extra ...string) []string {
		a := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
			"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out}
		return append(append(a, mirror.Args()...), extra...)
	}
	baseSum := testutil.SHA256File(t, base)

	out1 := filepath.Join(dir, "made")
	res := testutil.Run(t, args(out1)...).MustSucceed(t)
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	if !strings.Contains(res.Stdout, "flatcar-capo manifests --flavor sysext-baked --image-name "+name) {
		t.Errorf("stdout lacks the manifests command:\n%s", res.Stdout)
	}
	made := filepath.Join(out1, sysextFile)
	root := checkSysextImage(t, filepath.Join(out1, name+".qcow2"), made, false)
	if got := rootfstest.Stat(t, root, "/opt/extensions/kubernetes/"+sysextFile); got.UID != 0 || got.Mode != 0o644 {
		t.Errorf("stored sysext: %+v, want root-owned 0644", got)
	}
	if testutil.SHA256File(t, base) != baseSum {
		t.Fatal("the base image was modified")
	}
	// The record gives the at-boot flavor the sysext's sha512 for Ignition's verification.hash.
	m := testutil.Run(t, "manifests", "--from-record", filepath.Join(out1, name+".qcow2.build.json"), "--flavor", "sysext").MustSucceed(t)
	if !strings.Contains(m.Stdout, "sum: "+testutil.SHA512File(t, made)) {
		t.Errorf("manifests --from-record --flavor sysext lacks the sysext's sha512:\n%s", m.Stdout)
	}

	t.Run("prebuilt sysext by URL, updates kept", func(t *testing.T) {
		srv := httptest.NewServer(http.FileServer(http.Dir(out1)))
		defer srv.Close()
		out2 := filepath.Join(dir, "url")
		testutil.Run(t, args(out2, "--sysext", srv.URL+"/"+sysextFile, "--keep-updates")...).MustSucceed(t)
		checkSysextImage(t, filepath.Join(out2, name+".qcow2"), made, true)
	})

	t.Run("compressed qcow2 with --compress", func(t *testing.T) {
		testutil.RequireTool(t, "qemu-img")
		out := filepath.Join(dir, "compressed")
		testutil.Run(t, args(out, "--compress")...).MustSucceed(t)
		img := filepath.Join(out, name+".qcow2")
		checkSysextImage(t, img, filepath.Join(out, sysextFile), false) // made again: its own mtime
		plain, _ := os.Stat(filepath.Join(out1, name+".qcow2"))
		small, _ := os.Stat(img)
		if small.Size() >= plain.Size()*3/4 {
			t.Errorf("--compress wrote %d bytes, the plain artifact is %d", small.Size(), plain.Size())
		}
		// qemu-img's own count of compressed clusters: the artifact is what convert -c writes.
		b, err := exec.Command("qemu-img", "check", img).CombinedOutput()
		check := string(b)
		if err != nil || !strings.Contains(check, "compressed clusters") || strings.Contains(check, " 0.00% compressed clusters") {
			t.Errorf("qemu-img check of the --compress artifact:\n%s", check)
		}
		if rec, err := record.Read(img); err != nil || !rec.Inputs.Compressed {
			t.Errorf("record inputs.compressed: %+v %v", rec, err)
		}
	})

	t.Run("dry run plans the bake and writes nothing", func(t *testing.T) {
		out := filepath.Join(dir, "dry")
		res := testutil.Run(t, args(out, "--dry-run")...).MustSucceed(t)
		for _, want := range []string{"made from the Kubernetes v1.33.4 release binaries", "/opt/extensions/kubernetes/" + sysextFile,
			"link:        /etc/extensions/kubernetes.raw", "update-engine.service and locksmithd.service masked", name} {
			if !strings.Contains(res.Stdout+res.Stderr, want) {
				t.Errorf("--dry-run output lacks %q:\n%s%s", want, res.Stdout, res.Stderr)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(out, "*")); len(left) != 0 {
			t.Errorf("--dry-run wrote %v", left)
		}
	})

	t.Run("damaged sysext refused", func(t *testing.T) {
		b, err := os.ReadFile(made)
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(t.TempDir(), sysextFile)
		os.WriteFile(bad, b[:len(b)/2], 0o644)
		out3 := filepath.Join(dir, "bad")
		testutil.Run(t, args(out3, "--sysext", bad)...).MustFail(t, 1, bad)
		if left := nonLockFiles(out3); len(left) != 0 {
			t.Errorf("a refused build left %v", left)
		}
	})

	t.Run("unpadded sysext refused", func(t *testing.T) {
		b, _ := os.ReadFile(made)
		if len(b)%4096 != 0 {
			t.Fatalf("the made sysext is %d bytes, not padded to 4 KiB as mksquashfs pads", len(b))
		}
		// What go-diskfs writes without padding: the file ends where the superblock's bytes_used does.
		used := binary.LittleEndian.Uint64(b[40:48])
		if used%512 == 0 || used > uint64(len(b)) {
			t.Fatalf("bytes_used %d: cannot make an unpadded copy that a loop device would cut", used)
		}
		odd := filepath.Join(t.TempDir(), sysextFile)
		os.WriteFile(odd, b[:used], 0o644)
		testutil.Run(t, args(filepath.Join(dir, "odd"), "--sysext", odd)...).MustFail(t, 1, odd, "not padded to 4 KiB", "loop device")
	})

	t.Run("sysext of another Kubernetes version refused", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "kubernetes-v1.32.0-x86-64.raw")
		b, _ := os.ReadFile(made)
		os.WriteFile(other, b, 0o644)
		testutil.Run(t, args(filepath.Join(dir, "other"), "--sysext", other)...).MustFail(t, 1,
			"is Kubernetes v1.32.0 but the build is for --kubernetes-version v1.33.4")
	})
}

// checkSysextImage converts the artifact back to raw with the CLI and checks its ROOT and record.
func checkSysextImage(t *testing.T, qcow2, sysext string, keepUpdates bool) (root string) {
	t.Helper()
	rec, err := record.Read(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Method != imagebuild.MethodSysext || rec.Flavor != "sysext-baked" || rec.KubernetesVersion != "v1.33.4" {
		t.Errorf("record: method %q flavor %q kubernetes %q", rec.Method, rec.Flavor, rec.KubernetesVersion)
	}
	// the qcow2 step's sha512 (computed while writing) is the artifact's
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].SHA512 != testutil.SHA512File(t, qcow2) {
		t.Errorf("record's artifact sha512 %+v is not that of %s", rec.Artifacts, qcow2)
	}
	wantSum := testutil.SHA512File(t, sysext)
	found := false
	for _, a := range rec.Artifacts {
		if a.File == sysextFile {
			found = a.SHA512 == wantSum
		}
	}
	if !found {
		t.Errorf("record artifacts %+v lack %s with sha512 %s", rec.Artifacts, sysextFile, wantSum)
	}
	raw := filepath.Join(t.TempDir(), "out.raw")
	testutil.Run(t, "convert", qcow2, raw).MustSucceed(t)
	// inspect (the command) reads the baked sysext in ROOT and says Flatcar would merge it.
	res := testutil.Run(t, "inspect", raw, "--for", "openstack", "-o", "json")
	var rep struct {
		Extensions struct {
			Links []struct {
				Path       string `json:"path"`
				WouldMerge bool   `json:"wouldMerge"`
			} `json:"links"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	if l := rep.Extensions.Links; len(l) != 1 || l[0].Path != "/etc/extensions/kubernetes.raw" || !l[0].WouldMerge {
		t.Errorf("inspect extensions.links = %+v, want kubernetes.raw that would merge\n%s", l, res.Stderr)
	}
	root = rootfstest.ExtractRoot(t, raw)
	rootfstest.Fsck(t, root, "of the built image's ROOT")
	stored := "/opt/extensions/kubernetes/" + sysextFile
	if rootfstest.DumpSum(t, root, stored) != testutil.SHA256File(t, sysext) {
		t.Errorf("%s in the image differs from %s", stored, sysext)
	}
	if got := rootfstest.Stat(t, root, "/etc/extensions/kubernetes.raw"); got.Type != "symlink" || got.LinkTarget != stored {
		t.Errorf("/etc/extensions/kubernetes.raw: %+v", got)
	}
	for _, u := range node.UpdateUnits {
		out := testutil.MustRun(t, "debugfs", "-R", "stat /etc/systemd/system/"+u, root)
		masked := strings.Contains(out, `Fast link dest: "/dev/null"`)
		if masked == keepUpdates {
			t.Errorf("%s masked=%v with --keep-updates=%v:\n%s", u, masked, keepUpdates, out)
		}
	}
	dropIn := filepath.Join(t.TempDir(), "dropin")
	testutil.MustRun(t, "debugfs", "-R", "dump "+node.KubeadmDropIn+" "+dropIn, root)
	if b, _ := os.ReadFile(dropIn); string(b) != node.KubeadmDropInContent {
		t.Errorf("kubeadm drop-in: %q", b)
	}
	return root
}

// TestConcurrentBuildsOneOutputDir: two pipelines building the same image into one --output-dir
// at the same moment never interleave: the second waits on the lock next to the artifact, says
// so, and then reuses the first one's artifact, whose record matches it.
func TestConcurrentBuildsOneOutputDir(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out}, mirror.Args()...)
	res := make([]testutil.Result, 2)
	done := make(chan int)
	for i := range res {
		go func() { res[i] = testutil.Run(t, args...); done <- i }()
	}
	<-done
	<-done
	waited := 0
	for _, r := range res {
		r.MustSucceed(t)
		if strings.Contains(r.Stderr+r.Stdout, "is building") && strings.Contains(r.Stderr+r.Stdout, "waiting for it") {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("%d builds said they waited for the other, want 1:\n%s\n----\n%s", waited, res[0].Combined(), res[1].Combined())
	}
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	artifact := filepath.Join(out, name+".qcow2")
	rec, err := record.Read(artifact)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Artifacts) == 0 || rec.Artifacts[0].SHA512 != testutil.SHA512File(t, artifact) {
		t.Errorf("the record does not describe the artifact: %+v", rec.Artifacts)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") || strings.HasPrefix(e.Name(), ".build-") || strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("left in the output directory: %s", e.Name())
		}
	}
}

// nonLockFiles lists dir without the artifact lock (.NAME.lock), which stays by design.
func nonLockFiles(dir string) []string {
	var out []string
	all, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range all {
		if !strings.HasSuffix(p, ".lock") {
			out = append(out, p)
		}
	}
	return out
}
