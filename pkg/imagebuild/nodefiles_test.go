package imagebuild

import (
	"bytes"
	"io/fs"
	"path"
	"testing"

	packerfiles "github.com/flatcar-capo/flatcar-capo/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// The inputs key covers the node files each method bakes, read from where the bake takes them:
// a changed byte of kubeadm's drop-in (or of any other) changes the key, so build rebuilds
// instead of reusing an artifact made with the old one.
func TestNodeFilesKeyTheBakedContent(t *testing.T) {
	find := func(files []nodeFile, p string) *nodeFile {
		for i := range files {
			if files[i].Path == p {
				return &files[i]
			}
		}
		return nil
	}
	dropIn := path.Join("ROOT", node.InRoot(node.KubeadmDropIn))
	sysextOpts := &Options{Method: MethodSysext, Release: testRelease}
	files, err := nodeFiles(sysextOpts)
	if err != nil {
		t.Fatal(err)
	}
	f := find(files, dropIn)
	if f == nil || string(f.Content) != node.KubeadmDropInContent {
		t.Fatalf("the sysext method's node files lack %s with node.KubeadmDropInContent: %+v", dropIn, f)
	}
	for _, p := range []string{
		"ROOT/" + node.InRoot(node.USBStorageConf), "ROOT/etc/systemd/system/update-engine.service", "ROOT/" + node.InRoot(node.ImportScript),
		"ROOT/" + node.InRoot(node.ContainerdConfDropIn), "sysext/kubernetes/" + node.InRoot(node.SysextKubeletUnit),
	} {
		if find(files, p) == nil {
			t.Errorf("the sysext method's node files lack %s", p)
		}
	}

	in, _, err := inputs(sysextOpts, testRelease)
	if err != nil {
		t.Fatal(err)
	}
	if in.NodeFiles != digestNodeFiles(files) || len(in.NodeFiles) != len("sha256:")+64 {
		t.Fatalf("inputs' nodeFiles %q is not the digest of the node files", in.NodeFiles)
	}
	// One byte more in the drop-in: another digest, another key (and the same files, the same).
	changed := append([]nodeFile{}, files...)
	c := find(changed, dropIn)
	c.Content = append(bytes.Clone(c.Content), '\n')
	other := in
	other.NodeFiles = digestNodeFiles(changed)
	if other.NodeFiles == in.NodeFiles || other.Key("", nil) == in.Key("", nil) {
		t.Fatal("a changed kubeadm drop-in leaves the inputs key as it was: an old artifact would be reused")
	}
	if again, _ := nodeFilesDigest(sysextOpts); again != in.NodeFiles {
		t.Fatalf("the digest is not stable: %s then %s", in.NodeFiles, again)
	}
	c.Content, c.Mode = f.Content, f.Mode|0o100
	if digestNodeFiles(changed) == in.NodeFiles {
		t.Error("a changed mode leaves the digest as it was")
	}

	// The packer method's: every file of packer/ (the template and the guest scripts).
	packerOpts := &Options{Method: MethodPacker, Release: testRelease}
	pfiles, err := nodeFiles(packerOpts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	fs.WalkDir(packerfiles.FS, ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
			b, _ := packerfiles.FS.ReadFile(p)
			if f := find(pfiles, path.Join("packer", p)); f == nil || !bytes.Equal(f.Content, b) {
				t.Errorf("the packer method's node files lack packer/%s", p)
			}
		}
		return nil
	})
	if n < 6 || find(pfiles, "packer/environment") == nil || find(pfiles, dropIn) != nil {
		t.Errorf("packer method: %d files in packer/, environment %v, sysext drop-in %v", n, find(pfiles, "packer/environment") != nil, find(pfiles, dropIn) != nil)
	}
	// The options that change what is baked change the digest.
	for name, o := range map[string]*Options{
		"packer":              packerOpts,
		"--keep-updates":      {Method: MethodSysext, KeepUpdates: true},
		"--no-preload-images": {Method: MethodSysext, Images: ImageOptions{NoPreload: true}},
		"--sysext":            {Method: MethodSysext, Sysext: []string{"k.raw"}},
	} {
		if d, err := nodeFilesDigest(o); err != nil || d == in.NodeFiles {
			t.Errorf("%s: node files digest %s (err %v), the same as the default sysext build's", name, d, err)
		}
	}
	// An older record (no nodeFiles) keeps its key, so it never matches a new build's.
	var old record.Inputs
	if old.Key("", nil) == (record.Inputs{NodeFiles: in.NodeFiles}).Key("", nil) {
		t.Error("an inputs without nodeFiles has the key of one with them")
	}
}
