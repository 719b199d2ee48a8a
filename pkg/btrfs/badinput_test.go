package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// recorder is a Device that records writes and can fail the n-th one (1-based; 0 never).
type recorder struct {
	*os.File
	failAt int
	writes []int64
}

var errInjected = errors.New("injected write failure")

func (r *recorder) WriteAt(p []byte, off int64) (int, error) {
	r.writes = append(r.writes, off)
	if len(r.writes) == r.failAt {
		// A partial write, to prove the roll-back restores the block that failed too.
		r.File.WriteAt(p[:len(p)/2], off)
		return len(p) / 2, errInjected
	}
	return r.File.WriteAt(p, off)
}

func TestOpenBadInput(t *testing.T) {
	plain := mkImage(t, mixedSingle, qemuOEM(true))
	fs, _ := openImage(t, plain)
	phys := func(logical uint64) int64 {
		p, err := fs.physical(logical, int(fs.sb.nodeSize))
		if err != nil {
			t.Fatal(err)
		}
		return p[0]
	}
	cases := []struct {
		name   string
		damage func(img string)
		is     error
		msg    string
	}{
		{"zeros", func(img string) { os.WriteFile(img, make([]byte, 1<<20), 0o600) }, errNotBtrfs, "no magic"},
		{"too-small", func(img string) { os.WriteFile(img, make([]byte, 1000), 0o600) }, errNotBtrfs, "too small"},
		{"superblock-csum", func(img string) { testutil.FlipByte(t, img, superOffset+0x12b) }, errCorrupt, "superblock checksum mismatch"},
		{"chunk-tree-csum", func(img string) { testutil.FlipByte(t, img, phys(fs.sb.chunkRoot)+200) }, errCorrupt, "chunk tree: btrfs corrupt: tree block 1048576: checksum mismatch"},
		{"root-tree-csum", func(img string) { testutil.FlipByte(t, img, phys(fs.sb.root)+200) }, errCorrupt, "root tree: btrfs corrupt: tree block"},
		{"fs-tree-csum", func(img string) { testutil.FlipByte(t, img, phys(fs.fsTree.logical)+3000) }, errCorrupt, "FS tree root: btrfs corrupt: tree block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := t.TempDir() + "/img"
			testutil.MustRun(t, "cp", "--sparse=always", plain, img)
			c.damage(img)
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			_, err = Open(f, st.Size())
			if err == nil || !strings.Contains(err.Error(), c.msg) || c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("Open error = %v, want one saying %q (is %v)", err, c.msg, c.is)
			}
		})
	}
}

// TestWriteRepairsBadCopy: with DUP metadata, a leaf whose first copy is damaged is read from
// the second one, and WriteFile writes the edited leaf to both.
func TestWriteRepairsBadCopy(t *testing.T) {
	want := qemuOEM(true)
	img := mkImage(t, mixedDup, want)
	fs, _ := openImage(t, img)
	p, err := fs.physical(fs.fsTree.logical, int(fs.sb.nodeSize))
	if err != nil || len(p) != 2 {
		t.Fatalf("FS tree root copies = %v, %v; want 2 (DUP)", p, err)
	}
	testutil.FlipByte(t, img, p[0]+3000)
	fs, dev := openImage(t, img)
	sameFiles(t, "ReadFile with one bad copy", readAllFS(t, fs, want), want)
	rec := &recorder{File: dev}
	if err := fs.write(rec, "/grub.cfg", []byte(openstackGrub)); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 2 || rec.writes[0] != p[0] || rec.writes[1] != p[1] {
		t.Errorf("writes at %v, want both copies %v", rec.writes, p)
	}
	want["/grub.cfg"] = []byte(openstackGrub)
	verifyImage(t, img, want)
}

// TestWriteFailureRollsBack: a failed write leaves every copy as it was.
func TestWriteFailureRollsBack(t *testing.T) {
	for _, failAt := range []int{1, 2} {
		want := qemuOEM(true)
		img := mkImage(t, mixedDup, want)
		fs, dev := openImage(t, img)
		p, _ := fs.physical(fs.fsTree.logical, int(fs.sb.nodeSize))
		before := readAt(t, dev, p[0], p[1])
		rec := &recorder{File: dev, failAt: failAt}
		err := fs.write(rec, "/grub.cfg", []byte(openstackGrub))
		if !errors.Is(err, errInjected) {
			t.Fatalf("failAt %d: WriteFile error = %v, want the injected failure", failAt, err)
		}
		if after := readAt(t, dev, p[0], p[1]); !bytes.Equal(after, before) {
			t.Fatalf("failAt %d: leaf copies changed after a failed write", failAt)
		}
		verifyImage(t, img, want)
	}
}

// TestRefusedWriteTouchesNothing: refusals happen before any WriteAt.
func TestRefusedWriteTouchesNothing(t *testing.T) {
	img := mkImage(t, mixedSingle, qemuOEM(true))
	fs, dev := openImage(t, img)
	for _, c := range []struct {
		path string
		data []byte
	}{
		{"/grub.cfg", make([]byte, 4097)}, // zeros compress, but not beyond a sector
		{sysextPath, nil},
		{"/nodir/grub.cfg", nil},
		{"/", nil},
		{"/sysext", []byte("x")},
		{"/" + strings.Repeat("n", 256), nil},
	} {
		rec := &recorder{File: dev}
		if err := fs.write(rec, c.path, c.data); err == nil || len(rec.writes) != 0 {
			t.Errorf("WriteFile(%.20s) = %v with %d writes; want an error and none", c.path, err, len(rec.writes))
		}
	}
}

func readAt(t *testing.T, f *os.File, offs ...int64) []byte {
	t.Helper()
	var out []byte
	for _, off := range offs {
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestCorruptLeaf: a damaged leaf below the FS tree root fails reads and writes that need it
// with ErrCorrupt, and the write touches nothing.
func TestCorruptLeaf(t *testing.T) {
	want := qemuOEM(true)
	for i := 0; i < 300; i++ {
		want[fmt.Sprintf("/many/f%03d", i)] = []byte("x")
	}
	img := mkImage(t, mixedSingle, want)
	fs, _ := openImage(t, img)
	if fs.fsTree.level == 0 {
		t.Fatal("FS tree is a single leaf; the test needs a leaf below a node")
	}
	in, err := fs.resolve("test", "/grub.cfg")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := fs.leafFor(fs.fsTree, key{in.ino, typeExtentData, 0})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := fs.physical(leaf.logical, len(leaf.buf))
	testutil.FlipByte(t, img, p[0]+2000)

	fs, dev := openImage(t, img)
	if _, err := fs.read("/grub.cfg"); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("ReadFile over a corrupt leaf: %v, want ErrCorrupt (checksum mismatch)", err)
	}
	rec := &recorder{File: dev}
	if err := fs.write(rec, "/grub.cfg", []byte(openstackGrub)); !errors.Is(err, errCorrupt) || len(rec.writes) != 0 {
		t.Errorf("WriteFile over a corrupt leaf: %v with %d writes, want ErrCorrupt and none", err, len(rec.writes))
	}
}
