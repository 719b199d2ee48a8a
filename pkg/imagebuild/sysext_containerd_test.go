package imagebuild_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/containerdtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// `build --method sysext --containerd-version V` takes containerd's release tarball and runc
// from --github-mirror (a stand-in of GitHub serving the real containerd binaries), bakes the
// containerd sysext into ROOT linked as /etc/extensions/containerd.raw, masks Flatcar's own
// (containerd-flatcar.raw -> /dev/null), records both downloads and the choice in the inputs,
// and `inspect` says the node runs V. Without the flag nothing of it is in the image.
func TestBuildSysextOwnContainerd(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs", "runc", "unsquashfs")
	bin := registrytest.ContainerdDir(t)
	runc, _ := exec.LookPath("runc")
	mirror := kubetest.New(t, kubernetes.Options{})
	v := registrytest.ContainerdVersion
	rel := containerdtest.Publish(t, mirror.Server, containerd.Options{Version: v}, bin, runc)
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := append([]string{"build", "--method", "sysext", "--no-preload-images", "--base-image", base, "--version", "4459.2.0",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out, "--containerd-version", v}, mirror.Args()...)
	testutil.Run(t, args...).MustSucceed(t)
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	qcow2 := filepath.Join(out, name+".qcow2")
	file := "containerd-" + v + "-x86-64.raw"

	rec, err := record.Read(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	if want := v + " runc " + rel.Options.Runc; rec.Inputs.Containerd != want {
		t.Errorf("record inputs containerd %q, want %q", rec.Inputs.Containerd, want)
	}
	got := map[string]string{}
	for _, d := range rec.Downloads {
		got[d.URL] = d.SHA256
	}
	if got[mirror.URL+rel.TarballPath] != rel.TarballSHA256 || got[mirror.URL+rel.RuncPath] != rel.RuncSHA256 {
		t.Errorf("record downloads lack the containerd tarball or runc: %+v", rec.Downloads)
	}
	raw := filepath.Join(dir, "out.raw")
	testutil.Run(t, "convert", qcow2, raw).MustSucceed(t)
	root := rootfstest.ExtractRoot(t, raw)
	rootfstest.Fsck(t, root, "with the containerd sysext")
	if st := rootfstest.Stat(t, root, "/etc/extensions/containerd.raw"); st.Type != "symlink" || st.LinkTarget != "/opt/extensions/containerd/"+file {
		t.Errorf("/etc/extensions/containerd.raw: %+v", st)
	}
	if st := rootfstest.Stat(t, root, "/etc/extensions/containerd-flatcar.raw"); st.Type != "symlink" || st.LinkTarget != "/dev/null" {
		t.Errorf("Flatcar's containerd is not masked: %+v", st)
	}
	// The stored sysext is the one next to the artifact, and its containerd is the real one.
	stored := filepath.Join(dir, "stored.raw")
	testutil.MustRun(t, "debugfs", "-R", "dump /opt/extensions/containerd/"+file+" "+stored, root)
	if testutil.SHA256File(t, stored) != testutil.SHA256File(t, filepath.Join(out, file)) {
		t.Error("the baked containerd sysext differs from the one next to the artifact")
	}
	tree := filepath.Join(dir, "tree")
	testutil.MustRun(t, "unsquashfs", "-d", tree, stored)
	if b, err := exec.Command(filepath.Join(tree, "usr/bin/containerd"), "--version").CombinedOutput(); err != nil || !strings.Contains(string(b), "v"+v) {
		t.Errorf("the baked containerd --version: %v %s", err, b)
	}

	res := testutil.Run(t, "inspect", raw, "--for", "openstack", "-o", "json")
	var rep struct {
		Extensions struct{ Containerd string }
	}
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v\n%s", err, res.Combined())
	}
	if !strings.HasPrefix(rep.Extensions.Containerd, v+" (/opt/extensions/containerd/"+file+")") {
		t.Errorf("inspect's containerd: %q", rep.Extensions.Containerd)
	}
	if txt := testutil.Run(t, "inspect", raw, "--for", "openstack").Stdout; !strings.Contains(txt, "containerd the node runs: "+v) || !strings.Contains(txt, "containerd-flatcar.raw -> /dev/null") {
		t.Errorf("inspect text:\n%s", txt)
	}

	// Bad input is refused before any download: exit 2, naming the flag.
	bad := append([]string{}, args...)
	for i, a := range bad {
		if a == out {
			bad[i] = filepath.Join(dir, "bad")
		}
	}
	testutil.Run(t, append(bad, "--runc-version", "one")...).MustFail(t, 2, "--runc-version")
	if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
		t.Error("a refused build left an output directory")
	}
}
