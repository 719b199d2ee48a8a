package squashfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

var epoch = time.Unix(1764547200, 0)

// tree writes a directory that exercises the layout: multi-block files with short tails,
// exact block multiples, sparse (all-zero) blocks, fragments, an empty file, a symlink, an
// empty directory, setuid, and a directory of 300 entries (more than one directory header and
// metadata block).
func tree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	mixed := func(n int) []byte {
		b := make([]byte, n)
		for i := 0; i < n; i += 4096 {
			end := min(i+4096, n)
			if rng.Intn(2) == 0 {
				rng.Read(b[i:end])
			} else {
				copy(b[i:end], bytes.Repeat([]byte("k8s.io/kubelet runtime "), 200))
			}
		}
		return b
	}
	files := map[string][]byte{
		"usr/bin/kubelet": mixed(1<<20 + 123),
		"usr/bin/exact":   mixed(2 << 17),
		"usr/lib/zeros":   append(make([]byte, 3<<17), mixed(1000)...),
		"usr/lib/empty":   nil,
		"usr/lib/one":     {'x'},
		"usr/lib/almost":  mixed(131071),
		"usr/lib/random":  func() []byte { b := make([]byte, 200000); rng.Read(b); return b }(),
		"usr/lib/extension-release.d/extension-release.kubernetes": []byte("ID=_any\n"),
	}
	for i := 0; i < 300; i++ {
		files[fmt.Sprintf("usr/share/many/file-with-a-longer-name-%03d", i)] = mixed(rng.Intn(3000))
	}
	for p, b := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "usr/bin/kubelet"), 0o4755)
	os.Chmod(filepath.Join(dir, "usr/bin/exact"), 0o755)
	os.MkdirAll(filepath.Join(dir, "etc/empty"), 0o700)
	os.Symlink("../bin/kubelet", filepath.Join(dir, "usr/lib/link"))
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		os.Chtimes(p, epoch, epoch)
		return err
	})
	return dir
}

// writeTree writes dir with our writer, walking it in lexical order.
func writeTree(t testing.TB, dir, out string, opt Options) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewWriter(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return w.Mkdir(rel, fi.Mode())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return w.Symlink(rel, target)
		default:
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			return w.Create(rel, fi.Mode(), src)
		}
	})
	if err != nil {
		w.Abort()
		t.Fatal(err)
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every field the kernel and unsquashfs read, compared with what mksquashfs writes for the
// same tree: superblock counts, each inode's type, mode, owner, mtime, link count, size,
// parent inode, inode number, symlink target, block count, sparse blocks and fragment use, and
// each directory's listing size. Then the content, through unsquashfs.
func TestFieldsMatchMksquashfs(t *testing.T) {
	testutil.RequireTools(t, "mksquashfs", "unsquashfs")
	src := tree(t)
	tmp := t.TempDir()
	for _, c := range []struct {
		comp  string
		level int
	}{{"gzip", 1}, {"zstd", 3}} {
		t.Run(c.comp, func(t *testing.T) {
			ours := filepath.Join(tmp, c.comp+"-ours.sqfs")
			theirs := filepath.Join(tmp, c.comp+"-mksquashfs.sqfs")
			writeTree(t, src, ours, Options{Compression: c.comp, Level: c.level, ModTime: epoch})
			ts := strconv.FormatInt(epoch.Unix(), 10)
			cmd := exec.Command("mksquashfs", src, theirs, "-noappend", "-all-root", "-no-xattrs", "-no-exports",
				"-no-duplicates", "-comp", c.comp, "-Xcompression-level", strconv.Itoa(c.level), "-b", "131072",
				"-all-time", ts, "-mkfs-time", ts, "-processors", "1", "-quiet", "-no-progress")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("mksquashfs: %v\n%s", err, out)
			}
			a, b := readImage(t, ours), readImage(t, theirs)
			sa, sb := a.sb, b.sb
			if sa.Inodes != sb.Inodes || sa.MkfsTime != sb.MkfsTime || sa.BlockSize != sb.BlockSize || sa.BlockLog != sb.BlockLog ||
				sa.Compression != sb.Compression || sa.IDs != sb.IDs || sa.Fragments != sb.Fragments || sa.ExportTab != sb.ExportTab || sa.Xattr != sb.Xattr {
				t.Errorf("superblock differs:\nours       %+v\nmksquashfs %+v", sa, sb)
			}
			const informational = 0x0040 | 0x0400 // duplicates removed, compressor options stored
			if sa.Flags&^informational != sb.Flags&^informational {
				t.Errorf("flags %#x, mksquashfs %#x", sa.Flags, sb.Flags)
			}
			if len(a.files) != len(b.files) {
				t.Errorf("%d inodes, mksquashfs %d", len(a.files), len(b.files))
			}
			for p, want := range b.files {
				got, ok := a.files[p]
				if !ok {
					t.Errorf("%s missing", p)
					continue
				}
				if got.Type != want.Type || got.Mode != want.Mode || got.UID != want.UID || got.GID != want.GID ||
					got.Mtime != want.Mtime || got.Nlink != want.Nlink || got.Size != want.Size || got.Parent != want.Parent ||
					got.Ino != want.Ino || got.Target != want.Target || len(got.Blocks) != len(want.Blocks) ||
					(got.Frag == noFragment) != (want.Frag == noFragment) || got.FragOff != want.FragOff ||
					fmt.Sprint(got.Index) != fmt.Sprint(want.Index) {
					t.Errorf("%q:\nours       %+v\nmksquashfs %+v", p, brief(got), brief(want))
				}
				for i := range got.Blocks {
					if i < len(want.Blocks) && (got.Blocks[i] == 0) != (want.Blocks[i] == 0) {
						t.Errorf("%s block %d: sparse %v, mksquashfs %v", p, i, got.Blocks[i] == 0, want.Blocks[i] == 0)
					}
				}
			}
			x := filepath.Join(tmp, c.comp+"-x")
			testutil.MustRun(t, "unsquashfs", "-d", x, "-no-progress", ours)
			if out, err := exec.Command("diff", "-r", "--no-dereference", src, x).CombinedOutput(); err != nil {
				t.Errorf("unsquashfs' extraction differs from the source tree: %v\n%s", err, out)
			}
		})
	}
}

func brief(in inode) string {
	blocks := in.Blocks
	in.Blocks, in.Start = nil, 0
	if len(in.Index) > 3 {
		in.Index = in.Index[:3]
	}
	return fmt.Sprintf("%+v blocks=%d", in, len(blocks))
}

// The bytes depend on the input and options only, not on how many goroutines compress.
func TestDeterministic(t *testing.T) {
	src := tree(t)
	tmp := t.TempDir()
	var first []byte
	for _, workers := range []int{1, 2, 7} {
		out := filepath.Join(tmp, strconv.Itoa(workers))
		writeTree(t, src, out, Options{Compression: "gzip", Level: 1, ModTime: epoch, Workers: workers})
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(b)%4096 != 0 {
			t.Errorf("%d workers: %d bytes, not padded to 4 KiB", workers, len(b))
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Errorf("%d workers: the image differs from the 1-worker one", workers)
		}
	}
}

func TestRefusesBadPaths(t *testing.T) {
	w, err := NewWriter(&discard{}, Options{ModTime: epoch})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Create("usr/bin/x", 0o755, bytes.NewReader([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"/abs": "invalid path", "../up": "invalid path", "usr/bin/x": "given twice",
		"usr/bin/x/y": "both a file and a directory", "usr/bin": "both a file and a directory"} {
		if err := w.Create(p, 0o644, bytes.NewReader(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
}

type discard struct{}

func (discard) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
