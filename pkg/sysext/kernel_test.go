package sysext

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// The kernel's squashfs driver, through a loop device as systemd-sysext mounts an image, reads
// what we write: both compressions, root-owned, modes kept, the stand-in kubelet runs from it and
// from an overlay of it over the host's /usr (systemd-sysext's merge).
// And an image without mksquashfs' 4 KiB padding is refused by the kernel, which is why Create
// pads and Problems flags an unpadded one.
func TestKernelMountsCreatedSysext(t *testing.T) {
	testutil.RequireRoot(t, "loop-mounting the sysext with the kernel's squashfs driver")
	testutil.RequireTools(t, "mount", "umount")
	dir := t.TempDir()
	for _, comp := range []string{"gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			in := kubernetesInput(t, dir)
			in.Compression = comp
			img := filepath.Join(dir, comp+".raw")
			info, err := CreateKubernetes(context.Background(), in, img)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size%4096 != 0 || info.Validate("kubernetes") != nil {
				t.Fatalf("size %d, %v", info.Size, info.Validate("kubernetes"))
			}
			mnt := testutil.MountSquashfs(t, img)
			out, err := exec.Command(filepath.Join(mnt, "usr/bin/kubelet"), "--version").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "stand-in kubelet --version") {
				t.Errorf("running kubelet from the mounted sysext: %v %s", err, out)
			}
			for p, mode := range map[string]os.FileMode{"usr/bin/kubelet": 0o755, "usr/local/bin/cni/bridge": 0o755,
				"usr/lib/systemd/system/kubelet.service": 0o644, "usr/lib/extension-release.d": 0o755 | os.ModeDir} {
				fi, err := os.Stat(filepath.Join(mnt, p))
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if fi.Mode() != mode || st.Uid != 0 || st.Gid != 0 {
					t.Errorf("%s: mode %v uid %d gid %d", p, fi.Mode(), st.Uid, st.Gid)
				}
			}
			checkDirLinks(t, mnt)
			// What systemd-sysext does: an overlay with the extension's /usr above the host's.
			merged := t.TempDir()
			if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", "ro,lowerdir="+filepath.Join(mnt, "usr")+":/usr", merged).CombinedOutput(); err != nil {
				t.Fatalf("overlay over /usr: %v\n%s", err, out)
			}
			defer exec.Command("umount", merged).Run()
			if out, err := exec.Command(filepath.Join(merged, "bin/kubelet")).CombinedOutput(); err != nil || !strings.Contains(string(out), "stand-in kubelet") {
				t.Errorf("kubelet from the merged /usr: %v %s", err, out)
			}
			if _, err := os.Stat(filepath.Join(merged, "lib/systemd/system/multi-user.target.d/10-kubelet-service.conf")); err != nil {
				t.Errorf("the upholds drop-in is not in the merged /usr: %v", err)
			}
			rel, err := os.ReadFile(filepath.Join(mnt, ReleasePath("kubernetes")))
			if err != nil || !strings.Contains(string(rel), "ARCHITECTURE=x86-64\n") {
				t.Errorf("extension-release through the kernel: %v %q", err, rel)
			}
		})
	}
	// Unpadded (cut to the superblock's bytes_used, as go-diskfs writes it): refused by both.
	raw, _ := os.ReadFile(filepath.Join(dir, "gzip.raw"))
	info, err := Open(filepath.Join(dir, "gzip.raw"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "unpadded.raw")
	os.WriteFile(cut, raw[:info.BytesUsed], 0o644)
	if info.BytesUsed%512 == 0 {
		t.Fatalf("bytes_used %d happens to be sector-aligned; the fixture needs another size", info.BytesUsed)
	}
	if err := exec.Command("mount", "-t", "squashfs", "-o", "loop,ro", cut, t.TempDir()).Run(); err == nil {
		t.Error("the kernel mounted an unpadded image; the padding rule is wrong")
	}
	ui, err := Open(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.Validate("kubernetes"); err == nil || !strings.Contains(err.Error(), "not padded to 4 KiB") {
		t.Errorf("unpadded image: %v", err)
	}
}

// checkDirLinks checks every directory of a mounted image as the kernel reports it: link count
// 2 + subdirectories, and ".." (the inode's parent field) naming the parent's inode. go-diskfs'
// writer wrote 0 for both.
func checkDirLinks(t *testing.T, mnt string) {
	t.Helper()
	err := filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		subdirs := 0
		for _, e := range entries {
			if e.IsDir() {
				subdirs++
			}
		}
		var st, parent syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Nlink != uint64(2+subdirs) {
			t.Errorf("%s: link count %d, want %d (2 + %d subdirectories)", p, st.Nlink, 2+subdirs, subdirs)
		}
		if p == mnt {
			return nil
		}
		if err := syscall.Lstat(filepath.Dir(p), &parent); err != nil {
			return err
		}
		if got := testutil.DotDotIno(t, p); got != parent.Ino {
			t.Errorf("%s: .. is inode %d, the parent directory is %d", p, got, parent.Ino)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
