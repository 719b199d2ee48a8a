package disk_test

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// rootTree is a small ROOT: directories, files of one and several blocks, an empty file and
// symbolic links (relative, absolute, to a directory), none dangling, as fstest.TestFS opens them.
func rootTree(t *testing.T) (dir string, files []string) {
	dir = t.TempDir()
	write := func(p string, data []byte) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	write("etc/hostname", []byte("node\n"))
	write("etc/containerd/conf.d/10-flatcar-capo.toml", []byte("version = 2\n"))
	write("opt/extensions/kubernetes/kubernetes.raw", bytes.Repeat([]byte("sysext "), 3000))
	write("var/lib/empty", nil)
	for link, target := range map[string]string{"etc/extensions/kubernetes.raw": "/opt/extensions/kubernetes/kubernetes.raw",
		"etc/host": "hostname", "opt/ext": "extensions"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
		files = append(files, link)
	}
	return dir, files
}

// TestOpenFSIsIOFS: every filesystem of a Flatcar-layout disk made by the real mkfs tools
// (btrfs and ext4 OEM, FAT ESP, ext4 ROOT), and a mksquashfs image, opened by disk.OpenFS, meets
// io/fs's contract (fstest.TestFS: Open, ReadDir, ReadFile, Stat, bad names refused), and
// Stat follows a symbolic link where Lstat does not.
func TestOpenFSIsIOFS(t *testing.T) {
	tree, rootFiles := rootTree(t)
	for _, kind := range []flatcardisk.OEMKind{flatcardisk.OEMBtrfs, flatcardisk.OEMExt4} {
		t.Run(string(kind), func(t *testing.T) {
			opts := flatcardisk.Options{OEM: kind, FirstBoot: true, RootTree: tree}
			img, err := disk.Open(flatcardisk.Build(t, opts), false)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			for part, want := range map[string]struct {
				kind  string
				files []string
			}{
				"OEM":        {map[flatcardisk.OEMKind]string{flatcardisk.OEMBtrfs: "btrfs", flatcardisk.OEMExt4: "ext4"}[kind], slices.Collect(maps.Keys(flatcardisk.OEMFiles(opts)))},
				"EFI-SYSTEM": {"FAT", []string{"flatcar/first_boot"}},
				"ROOT":       {"ext4", rootFiles},
			} {
				p, err := img.FindPartition(part)
				if err != nil {
					t.Fatal(err)
				}
				fsys, err := disk.OpenFS(vdisk.Protect(img.Section(p)), disk.PartitionName(p))
				if err != nil {
					t.Fatalf("%s: %v", part, err)
				}
				if fsys.Type() != want.kind {
					t.Errorf("%s: Type() = %s, want %s", part, fsys.Type(), want.kind)
				}
				if err := fstest.TestFS(fsys, want.files...); err != nil {
					t.Errorf("%s (%s): %v", part, fsys.Type(), err)
				}
				if _, err := fsys.Stat("no/such/file"); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: Stat of a missing file = %v, want fs.ErrNotExist", part, err)
				}
				if part == "ROOT" {
					checkLinks(t, fsys)
				}
			}
		})
	}
	t.Run("squashfs", func(t *testing.T) {
		testutil.RequireTools(t, "mksquashfs")
		sq := filepath.Join(t.TempDir(), "x.raw")
		testutil.MustRun(t, "mksquashfs", tree, sq, "-quiet", "-no-progress", "-all-root")
		f, err := os.Open(sq)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		fsys, err := disk.OpenFS(vdisk.ReadOnly(f, st.Size()), sq)
		if err != nil {
			t.Fatal(err)
		}
		if fsys.Type() != "squashfs" {
			t.Errorf("Type() = %s", fsys.Type())
		}
		if err := fstest.TestFS(fsys, rootFiles...); err != nil {
			t.Error(err)
		}
		checkLinks(t, fsys)
	})
}

// checkLinks: Stat and ReadFile follow etc/extensions/kubernetes.raw to its target; Lstat
// reports the link itself and ReadLink its target as written.
func checkLinks(t *testing.T, fsys disk.ReadFS) {
	t.Helper()
	const link, target = "etc/extensions/kubernetes.raw", "/opt/extensions/kubernetes/kubernetes.raw"
	if fi, err := fsys.Stat(link); err != nil || !fi.Mode().IsRegular() || fi.Size() != 21000 || fi.Name() != "kubernetes.raw" {
		t.Errorf("Stat(%s) = %v, %v; want the 21000-byte regular file it leads to", link, fi, err)
	}
	if data, err := fsys.ReadFile("etc/host"); err != nil || string(data) != "node\n" {
		t.Errorf("ReadFile(etc/host) = %q, %v", data, err)
	}
	rl, ok := fsys.(fs.ReadLinkFS)
	if !ok {
		t.Fatalf("%T is not an fs.ReadLinkFS", fsys)
	}
	if fi, err := rl.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(%s) = %v, %v; want the link", link, fi, err)
	}
	if got, err := rl.ReadLink(link); err != nil || got != target {
		t.Errorf("ReadLink(%s) = %q, %v; want %q", link, got, err, target)
	}
}

// TestWriteFileInPlace: WriteFile on an ext4 OEM replaces a file (longer, then shorter: no old
// bytes left) and creates one, read back through io/fs; a read-only device refuses it.
func TestWriteFileInPlace(t *testing.T) {
	img, err := disk.Open(flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMExt4}), true)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	p, err := img.FindPartition("OEM")
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := disk.OpenFS(img.Section(p), disk.PartitionName(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, data string }{
		{"grub.cfg", "set oem_id=\"openstack\"\nset linux_append=\"console=ttyS0 flatcar.autologin\"\n"},
		{"grub.cfg", "set oem_id=\"openstack\"\n"},
		{"config.ign", "{}"},
	} {
		if err := fsys.WriteFile(c.name, []byte(c.data)); err != nil {
			t.Fatalf("WriteFile(%s): %v", c.name, err)
		}
		if got, err := fsys.ReadFile(c.name); err != nil || string(got) != c.data {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", c.name, got, err, c.data)
		}
	}
	if err := fsys.WriteFile("/grub.cfg", nil); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("WriteFile(/grub.cfg) = %v, want fs.ErrInvalid", err)
	}
	ro, err := disk.OpenFS(vdisk.Protect(img.Section(p)), disk.PartitionName(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.WriteFile("grub.cfg", []byte("x")); err == nil {
		t.Error("WriteFile on a read-only device succeeded")
	}
}
