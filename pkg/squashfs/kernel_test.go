package squashfs

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// The kernel's squashfs driver, through a loop device as systemd-sysext mounts an image, sees
// what the source tree holds: every entry's mode, owner, size, mtime, link count, content and
// symlink target, each directory's ".." (its parent inode field) naming its parent's inode,
// and lookups by name in a directory with an index.
func TestKernelReadsImage(t *testing.T) {
	testutil.RequireRoot(t, "loop-mounting squashfs images with the kernel's driver")
	testutil.RequireTools(t, "mount", "umount")
	src := tree(t)
	for _, comp := range []string{"gzip", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img.sqfs")
			writeTree(t, src, img, Options{Compression: comp, Level: 1, ModTime: epoch})
			mnt := testutil.MountSquashfs(t, img)
			n := 0
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				m := filepath.Join(mnt, rel)
				want, _ := os.Lstat(p)
				got, err := os.Lstat(m)
				if err != nil {
					t.Errorf("%s: %v", rel, err)
					return nil
				}
				n++
				st := got.Sys().(*syscall.Stat_t)
				wantLinks := uint64(1)
				if d.IsDir() {
					wantLinks = want.Sys().(*syscall.Stat_t).Nlink // 2 + subdirectories on ext4/tmpfs too
				}
				if got.Mode() != want.Mode() || st.Uid != 0 || st.Gid != 0 || got.ModTime().Unix() != epoch.Unix() || st.Nlink != wantLinks ||
					(!d.IsDir() && got.Size() != want.Size()) {
					t.Errorf("%s: mode %v uid %d gid %d mtime %v nlink %d size %d; want mode %v nlink %d size %d",
						rel, got.Mode(), st.Uid, st.Gid, got.ModTime(), st.Nlink, got.Size(), want.Mode(), wantLinks, want.Size())
				}
				switch {
				case d.IsDir():
					parent := filepath.Dir(m)
					if rel == "." {
						return nil
					}
					pst, _ := os.Lstat(parent)
					if dotdot := testutil.DotDotIno(t, m); dotdot != pst.Sys().(*syscall.Stat_t).Ino {
						t.Errorf("%s: .. is inode %d, the parent is %d", rel, dotdot, pst.Sys().(*syscall.Stat_t).Ino)
					}
				case d.Type()&fs.ModeSymlink != 0:
					a, _ := os.Readlink(p)
					b, _ := os.Readlink(m)
					if a != b {
						t.Errorf("%s -> %q, want %q", rel, b, a)
					}
				default:
					a, _ := os.ReadFile(p)
					b, err := os.ReadFile(m)
					if err != nil || !bytes.Equal(a, b) {
						t.Errorf("%s: content differs (%v)", rel, err)
					}
				}
				return nil
			})
			if err != nil || n < 300 {
				t.Fatalf("walked %d entries: %v", n, err)
			}
		})
	}
}
