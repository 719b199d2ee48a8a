package inspect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// optBinTree is a ROOT tree with /opt/bin/kubelet and, if extra is set, one more file of that name.
func optBinTree(t *testing.T, extra string) string {
	t.Helper()
	tree := t.TempDir()
	os.MkdirAll(filepath.Join(tree, "opt", "bin"), 0o755)
	os.WriteFile(filepath.Join(tree, "opt", "bin", "kubelet"), []byte("#!/bin/sh\necho kubelet\n"), 0o755)
	if extra != "" {
		os.WriteFile(filepath.Join(tree, "opt", "bin", extra), []byte("x"), 0o644)
	}
	return tree
}

// withRoot writes the ext4 filesystem made by mkfs.ext4 mkfsArgs... -d tree into the ROOT
// partition of a Flatcar-layout image, then runs the debugfs edits on it first, as a user's
// e2fsprogs would have.
func withRoot(t *testing.T, tree string, mkfsArgs []string, debugfs ...string) string {
	t.Helper()
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	d, err := disk.Open(img, false)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := d.Partitions()
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	root, ok := disk.Find(parts, "ROOT")
	if !ok {
		t.Fatal("no ROOT")
	}
	fsPath := filepath.Join(t.TempDir(), "root.ext4")
	testutil.MustRun(t, "mkfs.ext4", append(append([]string{"-q", "-F", "-L", "ROOT"}, mkfsArgs...), "-d", tree, fsPath, "32M")...)
	for _, req := range debugfs {
		testutil.MustRun(t, "debugfs", "-w", "-R", req, fsPath)
	}
	b, err := os.ReadFile(fsPath)
	if err != nil || int64(len(b)) > root.Size {
		t.Fatalf("ROOT filesystem %d bytes for %d: %v", len(b), root.Size, err)
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, root.Start); err != nil {
		t.Fatal(err)
	}
	return img
}

// Issue 44: the SBOM silently dropped what the ext4 reader could not read. A ROOT made without
// metadata_csum and then edited by e2fsprogs (its inodes then carry no valid checksum, as none
// is kept) lists kubelet, as the checksums are verified only where the filesystem claims them;
// a file name of 248-255 bytes beside kubelet (which go-diskfs cannot parse) fails the command
// naming /opt/bin instead of an SBOM without the directory; a 1 TiB sparse file is refused at
// once rather than hashed for hours.
func TestSBOMDoesNotDropWhatItCannotRead(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "debugfs")
	sbomOf := func(t *testing.T, img string) (sbom.Inventory, testutil.Result) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "img.cdx.json")
		r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"inspect", img, "--sbom-file", out}, Timeout: 2 * time.Minute})
		if r.Code != 0 {
			return sbom.Inventory{}, r
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := sbom.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		return inv, r
	}
	hasKubelet := func(inv sbom.Inventory) bool {
		for _, f := range inv.Files {
			if f.Path == "/opt/bin/kubelet" && f.SHA256 != "" {
				return true
			}
		}
		return false
	}

	t.Run("no-metadata_csum-edited", func(t *testing.T) {
		img := withRoot(t, optBinTree(t, ""), []string{"-O", "^metadata_csum"}, "set_inode_field /opt/bin/kubelet mtime 20200101")
		inv, r := sbomOf(t, img)
		if r.Code != 0 || !hasKubelet(inv) {
			t.Fatalf("exit %d, SBOM files %+v:\n%s", r.Code, inv.Files, r.Stderr)
		}
	})
	t.Run("long-name", func(t *testing.T) {
		img := withRoot(t, optBinTree(t, strings.Repeat("n", 250)), nil)
		_, r := sbomOf(t, img)
		r.MustFail(t, 1, "/opt/bin")
	})
	t.Run("sparse-TiB", func(t *testing.T) {
		tree := optBinTree(t, "")
		f, err := os.Create(filepath.Join(tree, "opt", "bin", "huge"))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(1 << 40)
		f.Close()
		img := withRoot(t, tree, []string{"-b", "4096"})
		_, r := sbomOf(t, img)
		r.MustFail(t, 1, "/opt/bin/huge is 1024 GiB, more than such a file can sensibly be")
	})
}
