package rootfs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestBakeRefuses: what a fresh ROOT cannot carry, a missing, foreign or too small ROOT and bad
// added entries are refused with the problem named; the input is untouched and no output (or
// temporary file) is left.
func TestBakeRefuses(t *testing.T) {
	small := func(t *testing.T) []Entry {
		return []Entry{Bytes("etc/hello", 0o644, []byte("hi\n"))}
	}
	cases := []struct {
		name  string
		src   func(t *testing.T) string
		added func(t *testing.T) []Entry
		want  []string
	}{
		{"hard link", func(t *testing.T) string {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
			os.WriteFile(filepath.Join(dir, "etc/a"), []byte("a"), 0o644)
			if err := os.Link(filepath.Join(dir, "etc/a"), filepath.Join(dir, "etc/b")); err != nil {
				t.Fatal(err)
			}
			return image(t, 0, dir)
		}, small, []string{"/etc/a: hard link", "/etc/b: hard link"}},
		{"device node", func(t *testing.T) string {
			return image(t, 0, "", "mkdir /dev", "cd /dev", "mknod null c 1 3")
		}, small, []string{"/dev/null: device node (1:3)"}},
		{"fifo", func(t *testing.T) string {
			return image(t, 0, "", "mknod run.pipe p")
		}, small, []string{"/run.pipe: named pipe"}},
		{"xattr", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "tagged"), []byte("x"), 0o644)
			return image(t, 0, dir, "ea_set /tagged user.flatcar-capo test")
		}, small, []string{"/tagged: extended attributes (user.flatcar-capo)"}},
		{"file with data after a hole", func(t *testing.T) string {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "holey"), append(make([]byte, 8192), 'x'), 0o644)
			return image(t, 0, dir)
		}, small, []string{"/holey: sparse file with both data and holes"}},
		{"missing ROOT", func(t *testing.T) string {
			testutil.RequireTool(t, "sgdisk")
			img := image(t, 0, "")
			run(t, "sgdisk", "-c", "9:DATA", img)
			return img
		}, small, []string{`no partition named "ROOT"`, "partition 9"}},
		{"ROOT not ext4", func(t *testing.T) string {
			img := image(t, 0, "")
			start, _ := rootRange(t, img)
			f, _ := os.OpenFile(img, os.O_RDWR, 0)
			f.WriteAt(make([]byte, 1<<20), start)
			f.Close()
			return img
		}, small, []string{"partition 9 (ROOT) is not a readable ext4 filesystem"}},
		{"ROOT too small", func(t *testing.T) string { return image(t, 0, "") }, func(t *testing.T) []Entry {
			big := filepath.Join(t.TempDir(), "big.raw")
			os.WriteFile(big, nil, 0o644)
			os.Truncate(big, 400<<20)
			e, err := hostFile("opt/extensions/kubernetes/big.raw", 0o644, big)
			if err != nil {
				t.Fatal(err)
			}
			return []Entry{e}
		}, []string{"ROOT is ", "need about", "grow partition 9"}},
		{"added path escapes", func(t *testing.T) string { return image(t, 0, "") }, func(t *testing.T) []Entry {
			return []Entry{Bytes("etc/../../x", 0o644, nil)}
		}, []string{`invalid path "etc/../../x"`}},
		{"added file over a directory", func(t *testing.T) string { return image(t, 0, "") }, func(t *testing.T) []Entry {
			return []Entry{Bytes("lost+found", 0o644, nil)}
		}, []string{"cannot add /lost+found: ROOT already has it as a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.src(t)
			before := fileSum(t, src)
			outDir := t.TempDir()
			dst := filepath.Join(outDir, "out.img")
			res, err := bake(context.Background(), src, dst, c.added(t))
			if err == nil {
				t.Fatalf("Bake succeeded (%+v), want a refusal", res)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if left := dirListing(t, outDir); len(left) != 0 {
				t.Errorf("left behind in the output directory: %v", left)
			}
			if fileSum(t, src) != before {
				t.Error("the input image was modified")
			}
		})
	}
}
