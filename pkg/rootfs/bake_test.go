package rootfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

const mtime2020 = 1577836800 // 2020-01-01T00:00:00Z

// staging builds the tree the source ROOT is made from (mkfs.ext4 -d) and the debugfs commands
// that give it owners and times no unprivileged user can set on the host.
func staging(t *testing.T) (dir string, cmds []string) {
	dir = t.TempDir()
	write := func(p string, perm os.FileMode, data []byte) {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, data, perm); err != nil {
			t.Fatal(err)
		}
		os.Chmod(full, perm) // umask
	}
	write("etc/hostname", 0o644, []byte("stand-in\n"))
	write("etc/systemd/system/locksmithd.service", 0o644, []byte("[Unit]\n"))
	write("bin/suid", os.ModeSetuid|0o755, []byte("#!/bin/sh\n"))
	write("var/empty-file", 0o600, nil)
	big, _ := os.ReadFile(randomFile(t, 3<<20+123))
	write("var/lib/data.bin", 0o640, big)
	for i := range 600 { // more than one directory block
		write(fmt.Sprintf("var/lib/many/file-with-a-longish-name-%03d", i), 0o644, []byte{byte(i)})
	}
	os.MkdirAll(filepath.Join(dir, "home/core/.ssh"), 0o700)
	os.Chmod(filepath.Join(dir, "home/core"), 0o700)
	os.Symlink("../etc/hostname", filepath.Join(dir, "var/rel-link"))
	os.Symlink("/opt/somewhere", filepath.Join(dir, "var/abs-link"))
	os.Symlink("/"+strings.Repeat("long-target/", 8)+"end", filepath.Join(dir, "var/long-link"))
	cmds = []string{
		"sif /home/core uid 500", "sif /home/core gid 501",
		"sif /home/core/.ssh uid 500", "sif /home/core/.ssh gid 501",
		"sif /var/rel-link uid 500", "sif /var/rel-link gid 501",
		fmt.Sprintf("sif /etc/hostname mtime @%d", mtime2020),
		fmt.Sprintf("sif /var/rel-link mtime @%d", mtime2020),
		fmt.Sprintf("sif /home/core mtime @%d", mtime2020),
	}
	return dir, cmds
}

// TestBakeCarriesRootAndAddsSysext is the bake on a Flatcar-layout image: the original ROOT's
// entries keep type, mode, owner, mtime and content; the sysext (>= 100 MiB, where go-diskfs'
// write bugs show), its link, the kubeadm drop-in and the masks are added; e2fsck is clean
// before and after an offline resize2fs to a larger size; the input is not modified.
func TestBakeCarriesRootAndAddsSysext(t *testing.T) {
	dir, cmds := staging(t)
	src := image(t, 0, dir, cmds...)
	srcSum := fileSum(t, src)
	srcRoot := extractRoot(t, src)
	fsck(t, srcRoot, "of the source ROOT")

	sysext := randomFile(t, 110<<20+7)
	ext, err := kubernetesExtension(sysext, "v1.33.4", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Extensions: []Extension{ext}}
	added, err := l.Entries()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "baked.img")
	start := time.Now()
	res, err := bake(context.Background(), src, dst, added)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bake: %v (%d carried, %d added, %d MiB written, %d MiB of zeros skipped)", time.Since(start), res.Carried, res.Added, res.WrittenData>>20, res.SkippedZero>>20)
	if fileSum(t, src) != srcSum {
		t.Fatal("the source image was modified")
	}
	if len(res.Replaced) != 1 || res.Replaced[0] != "/etc/systemd/system/locksmithd.service" {
		t.Errorf("replaced = %v, want the old locksmithd.service file", res.Replaced)
	}

	root := extractRoot(t, dst)
	fsck(t, root, "of the baked ROOT")
	checkBaked(t, srcRoot, root, sysext)
	sb := run(t, "dumpe2fs", "-h", root)
	srcSB := run(t, "dumpe2fs", "-h", srcRoot)
	for _, want := range []string{"Filesystem volume name:   ROOT", "Block size:               4096", "Inode size:	          256", line(srcSB, "Filesystem UUID:")} {
		if !strings.Contains(sb, want) {
			t.Errorf("dumpe2fs of the baked ROOT lacks %q:\n%s", want, sb)
		}
	}
	features := line(sb, "Filesystem features:")
	for _, f := range []string{"has_journal", "extent", "64bit", "flex_bg"} {
		if !strings.Contains(features, f) {
			t.Errorf("features %q lack %s", features, f)
		}
	}

	// Flatcar's first boot grows ROOT; offline here (the boot test does it online).
	if err := os.Truncate(root, 4<<30); err != nil {
		t.Fatal(err)
	}
	run(t, "resize2fs", root)
	fsck(t, root, "after resize2fs to 4 GiB")
	if got := dumpSum(t, root, "/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw"); got != fileSum(t, sysext) {
		t.Error("the sysext changed after resize2fs")
	}
}

func line(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return prefix + " (missing)"
}

// checkBaked compares the baked ROOT with the source ROOT and the added files, through debugfs.
func checkBaked(t *testing.T, srcRoot, root, sysext string) {
	for _, p := range []string{"/etc/hostname", "/bin/suid", "/var/empty-file", "/var/lib/data.bin",
		"/home/core", "/home/core/.ssh", "/var/rel-link", "/var/abs-link", "/var/long-link",
		"/var/lib/many/file-with-a-longish-name-599", "/lost+found", "/"} {
		want, got := stat(t, srcRoot, p), stat(t, root, p)
		got.Size, want.Size = 0, 0 // directories differ in size (linear, no preallocation)
		if got != want {
			t.Errorf("%s: baked %+v, source %+v", p, got, want)
		}
		if want.Type == "regular" && dumpSum(t, root, p) != dumpSum(t, srcRoot, p) {
			t.Errorf("%s: content differs", p)
		}
	}
	if got := stat(t, root, "/home/core"); got.UID != 500 || got.GID != 501 || got.Mode != 0o700 || got.Mtime != mtime2020 {
		t.Errorf("/home/core: %+v, want 500:501 0700 mtime 2020", got)
	}
	if got := stat(t, root, "/var/rel-link"); got.UID != 500 || got.LinkTarget != "../etc/hostname" || got.Mtime != mtime2020 {
		t.Errorf("/var/rel-link: %+v, want owner 500, target ../etc/hostname, mtime 2020", got)
	}
	if got := stat(t, root, "/bin/suid"); got.Mode != 0o4755 {
		t.Errorf("/bin/suid mode %o, want 4755", got.Mode)
	}
	if got := run(t, "debugfs", "-R", "ls -l /var/lib/many", root); strings.Count(got, "file-with-a-longish-name-") != 600 {
		t.Errorf("/var/lib/many lost entries:\n%.2000s", got)
	}

	stored := "/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw"
	if got := stat(t, root, stored); got.Type != "regular" || got.Mode != 0o644 || got.UID != 0 || got.GID != 0 {
		t.Errorf("%s: %+v", stored, got)
	}
	if dumpSum(t, root, stored) != fileSum(t, sysext) {
		t.Errorf("%s: content differs from the sysext", stored)
	}
	links := map[string]string{
		"/etc/extensions/kubernetes.raw":            stored,
		"/etc/systemd/system/update-engine.service": "/dev/null",
		"/etc/systemd/system/locksmithd.service":    "/dev/null",
	}
	for p, target := range links {
		if got := stat(t, root, p); got.Type != "symlink" || got.LinkTarget != target {
			t.Errorf("%s: %+v, want a symlink to %s", p, got, target)
		}
	}
	dump := filepath.Join(t.TempDir(), "dropin")
	run(t, "debugfs", "-R", "dump /etc/systemd/system/kubeadm.service.d/10-flatcar.conf "+dump, root)
	if b, _ := os.ReadFile(dump); string(b) != node.KubeadmDropInContent {
		t.Errorf("kubeadm drop-in: %q", b)
	}
}

// TestBakeInPlace: the build's bake of its raw work copy (no image copy) gives the same ROOT, and
// a refusal leaves the image byte for byte as it was.
func TestBakeInPlace(t *testing.T) {
	dir, cmds := staging(t)
	img := image(t, 0, dir, cmds...)
	srcRoot := extractRoot(t, img)
	sysext := randomFile(t, 5<<20)
	ext, err := kubernetesExtension(sysext, "v1.33.4", "x86-64")
	if err != nil {
		t.Fatal(err)
	}
	added, err := Layout{Extensions: []Extension{ext}}.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bakeInPlace(img, added); err != nil {
		t.Fatal(err)
	}
	root := extractRoot(t, img)
	fsck(t, root, "of the ROOT baked in place")
	checkBaked(t, srcRoot, root, sysext)
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(img), ".rootfs-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	hard := t.TempDir()
	os.WriteFile(filepath.Join(hard, "a"), []byte("a"), 0o644)
	os.Link(filepath.Join(hard, "a"), filepath.Join(hard, "b"))
	bad := image(t, 0, hard)
	before := fileSum(t, bad)
	if _, err := bakeInPlace(bad, added); err == nil || !strings.Contains(err.Error(), "/a: hard link") {
		t.Fatalf("Bake in place with a hard link: %v", err)
	}
	if fileSum(t, bad) != before {
		t.Error("a refused in-place bake changed the image")
	}
}
