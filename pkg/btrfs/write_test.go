package btrfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

const openstackGrub = "# Flatcar GRUB settings\n\nset oem_id=\"openstack\"\n"

// longGrub is about 1.5 KiB of compressible GRUB settings.
func longGrub() []byte {
	var b strings.Builder
	b.WriteString("# Flatcar GRUB settings\n\nset oem_id=\"openstack\"\n")
	for b.Len() < 1500 {
		b.WriteString("set linux_append=\"$linux_append console=ttyS0,115200n8 flatcar.autologin\"\n")
	}
	return []byte(b.String())
}

// flatcarGrub is a grub.cfg of n comment lines and then settings: n=24 is the ~1.9 KiB of
// flatcardisk.LongGrubCfg, n=30 about 2.4 KiB. zlib shrinks it to ~250 bytes.
func flatcarGrub(n int, settings string) []byte {
	var b strings.Builder
	b.WriteString("# Flatcar GRUB settings\n#\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "# Line %02d of a long comment: GRUB sources this file from the OEM partition.\n", i)
	}
	b.WriteString("\n" + settings)
	return []byte(b.String())
}

const (
	qemuSettings      = "set oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n"
	openstackSettings = "set oem_id=\"openstack\"\n"
)

func TestWriteFile(t *testing.T) {
	sameLen := []byte(strings.Replace(qemuGrub, "qemu", "kvm1", 1))
	cases := []struct {
		name   string
		grub   bool // start from an image with grub.cfg
		writes []struct {
			path string
			data []byte
		}
	}{
		{"shorter", true, writes("/grub.cfg", openstackGrub)},
		{"longer", true, writes("/grub.cfg", string(longGrub()))},
		{"same-length", true, writes("/grub.cfg", string(sameLen))},
		{"compressible-beyond-max-inline", true, writes("/grub.cfg", string(flatcarGrub(30, openstackSettings)))},
		{"compressed-then-plain", true, writes("/grub.cfg", string(flatcarGrub(30, openstackSettings)), "/grub.cfg", openstackGrub)},
		{"empty", true, writes("/grub.cfg", "")},
		{"twice", true, writes("/grub.cfg", string(longGrub()), "/grub.cfg", openstackGrub)},
		{"empty-file-gets-data", true, writes("/sysext/active-oem-qemu", "x")},
		{"create-missing", false, writes("/grub.cfg", openstackGrub)},
		{"create-then-rewrite", false, writes("/grub.cfg", openstackGrub, "/grub.cfg", string(longGrub()))},
		{"create-empty-in-subdir", false, writes("/sysext/new-marker", "")},
		{"create-two", false, writes("/grub.cfg", openstackGrub, "/config.ign", "{}")},
		{"create-compressed", false, writes("/grub.cfg", string(flatcarGrub(30, openstackSettings)))},
	}
	for _, v := range variants {
		for _, c := range cases {
			if c.grub != v.grub {
				continue
			}
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				want := qemuOEM(v.grub)
				img := mkImage(t, v, want)
				fs, dev := openImage(t, img)
				for _, w := range c.writes {
					if err := fs.write(dev, w.path, w.data); err != nil {
						t.Fatalf("WriteFile(%s, %d bytes): %v", w.path, len(w.data), err)
					}
					want[w.path] = w.data
					if len(w.data) > fs.MaxInline() {
						if e := firstExtent(t, fs, w.path); e.compression != compressZlib {
							t.Fatalf("%s of %d bytes stored with compression %d, want zlib", w.path, len(w.data), e.compression)
						}
					}
					// The same FS sees its own write.
					if got, err := fs.read(w.path); err != nil || !bytes.Equal(got, w.data) {
						t.Fatalf("ReadFile(%s) after WriteFile = %q, %v", w.path, got, err)
					}
				}
				verifyImage(t, img, want)
			})
		}
	}
}

func writes(pathData ...string) []struct {
	path string
	data []byte
} {
	var out []struct {
		path string
		data []byte
	}
	for i := 0; i < len(pathData); i += 2 {
		out = append(out, struct {
			path string
			data []byte
		}{pathData[i], []byte(pathData[i+1])})
	}
	return out
}

// verifyImage checks img with btrfs check, re-opens it, reads every file through this package,
// through `btrfs restore`, through GRUB's btrfs driver and (as root) through the kernel.
func verifyImage(t *testing.T, img string, want oemFiles) {
	t.Helper()
	btrfsCheck(t, img)
	fs, _ := openImage(t, img)
	sameFiles(t, "ReadFile after re-open", readAllFS(t, fs, want), want)
	copiesAgree(t, fs)
	sameFiles(t, "btrfs restore", restoreFiles(t, img), want)
	sameFiles(t, "grub-fstest", grubFiles(t, img, want), want)
	if testutil.HaveRoot(t, "reading the files through a kernel mount") {
		sameFiles(t, "kernel mount", kernelFiles(t, img), want)
	}
}

// grubFiles reads every file of want with `grub-fstest IMG cp '(loop0)/PATH'`: GRUB's own
// btrfs driver, the one that sources the OEM grub.cfg at boot.
func grubFiles(t *testing.T, img string, want oemFiles) oemFiles {
	t.Helper()
	testutil.RequireTools(t, "grub-fstest")
	got := oemFiles{}
	out := filepath.Join(t.TempDir(), "grub-read")
	for p := range want {
		if msg, err := exec.Command("grub-fstest", img, "cp", "(loop0)"+p, out).CombinedOutput(); err != nil {
			t.Errorf("grub-fstest cp %s: %v\n%s", p, err, msg)
			continue
		}
		got[p] = readImage(t, out)
	}
	return got
}

// kernelFiles loop-mounts img read-only and reads every file; the mount is undone even when the
// test fails.
func kernelFiles(t *testing.T, img string, opts ...string) oemFiles {
	t.Helper()
	dir := mountImage(t, img, append([]string{"ro"}, opts...)...)
	defer umount(t, dir)
	return collect(t, dir)
}

func mountImage(t *testing.T, img string, opts ...string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.MustRun(t, "mount", "-t", "btrfs", "-o", strings.Join(append([]string{"loop"}, opts...), ","), img, dir)
	t.Cleanup(func() { exec.Command("umount", dir).Run() }) // no-op after a normal umount
	return dir
}

// umount unmounts dir; mount -o loop set up the loop device with autoclear, so it goes too.
// A child that a parallel test is forking holds copies of our open files until it execs, so
// "target is busy" is retried for a moment.
func umount(t *testing.T, dir string) {
	t.Helper()
	for try := 0; ; try++ {
		out, err := exec.Command("umount", dir).CombinedOutput()
		if err == nil {
			return
		}
		if try == 20 || !strings.Contains(string(out), "busy") {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWriteKernelCompressed works on what Flatcar's OEM looks like after the kernel wrote to it
// with the zlib compression property set: grub.cfg (~1.9 KiB, as in flatcardisk's
// btrfs-kernel-zlib) a zlib-compressed inline extent, a larger file in zlib-compressed regular
// extents. A rewrite keeps zlib when it pays off; the ~1.9 KiB rewrite of `oem set` does not fit
// the 4 KiB leaf uncompressed.
func TestWriteKernelCompressed(t *testing.T) {
	testutil.RequireRoot(t, "building a kernel-written (compress=zlib) fixture (loop mount)")
	cases := []struct {
		name        string
		writes      map[string][]byte
		compression uint8 // of the rewritten grub.cfg
	}{
		{"short-becomes-plain", map[string][]byte{"/grub.cfg": []byte(openstackGrub), "/config.ign": []byte("{}")}, compressNone},
		{"oem-set-stays-zlib", map[string][]byte{"/grub.cfg": flatcarGrub(24, openstackSettings)}, compressZlib},
		{"longer-than-max-inline", map[string][]byte{"/grub.cfg": flatcarGrub(30, openstackSettings)}, compressZlib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			img, want := kernelZlibImage(t)
			fs, dev := openImage(t, img)
			for p, data := range c.writes {
				if err := fs.write(dev, p, data); err != nil {
					t.Fatal(err)
				}
				want[p] = data
			}
			verifyImage(t, img, want)
			if e := firstExtent(t, fs, "/grub.cfg"); e.typ != extentInline || e.compression != c.compression {
				t.Errorf("rewritten grub.cfg extent is type %d compression %d, want inline with compression %d", e.typ, e.compression, c.compression)
			}
		})
	}
}

// kernelZlibImage builds the kernel-written fixture and checks its extents are what the test
// needs.
func kernelZlibImage(t *testing.T) (string, oemFiles) {
	t.Helper()
	want := qemuOEM(true)
	img := mkImage(t, mixedSingle, want)
	dir := mountImage(t, img, "compress=zlib")
	testutil.MustRun(t, "btrfs", "property", "set", dir, "compression", "zlib")
	big := bytes.Repeat([]byte("compressible sysext payload line\n"), 10000) // 330 KiB: 3 extents
	for p, data := range map[string][]byte{"/grub.cfg": flatcarGrub(24, qemuSettings), "/sysext/big.raw": big} {
		if err := os.WriteFile(dir+p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[p] = data
	}
	umount(t, dir)
	fs, _ := openImage(t, img)
	if e := firstExtent(t, fs, "/grub.cfg"); e.typ != extentInline || e.compression != compressZlib {
		t.Fatalf("fixture grub.cfg extent is type %d compression %d, want zlib inline", e.typ, e.compression)
	}
	if e := firstExtent(t, fs, "/sysext/big.raw"); e.typ != extentRegular || e.compression != compressZlib {
		t.Fatalf("fixture big.raw extent is type %d compression %d, want zlib regular", e.typ, e.compression)
	}
	sameFiles(t, "ReadFile of kernel-written image", readAllFS(t, fs, want), want)
	return img, want
}

// TestWriteCompressesWhenLeafIsFull: a plain inline grub.cfg made by mkfs is replaced by
// ~1.9 KiB that max_inline allows uncompressed but the 4 KiB mixed-mode leaf cannot hold; the
// compressed form fits.
func TestWriteCompressesWhenLeafIsFull(t *testing.T) {
	want := qemuOEM(true)
	img := mkImage(t, mixedSingle, want)
	fs, dev := openImage(t, img)
	data := flatcarGrub(24, openstackSettings)
	if len(data) > fs.MaxInline() {
		t.Fatalf("test content of %d bytes is over max_inline %d; it must be the leaf that is too small", len(data), fs.MaxInline())
	}
	if e := firstExtent(t, fs, "/grub.cfg"); e.compression != compressNone {
		t.Fatalf("mkfs stored grub.cfg with compression %d", e.compression)
	}
	if err := fs.write(dev, "/grub.cfg", data); err != nil {
		t.Fatal(err)
	}
	want["/grub.cfg"] = data
	verifyImage(t, img, want)
	if e := firstExtent(t, fs, "/grub.cfg"); e.compression != compressZlib || e.ramBytes != uint64(len(data)) || len(e.inline) >= len(data) {
		t.Errorf("grub.cfg extent: compression %d, ram_bytes %d, %d bytes stored; want zlib, %d, fewer", e.compression, e.ramBytes, len(e.inline), len(data))
	}
}

// TestWriteNoCompressInode: a file the kernel would never compress (chattr +m sets
// NOCOMPRESS) is only ever written plain, so content that needs zlib is refused.
func TestWriteNoCompressInode(t *testing.T) {
	testutil.RequireRoot(t, "chattr +m (loop mount)")
	testutil.RequireTools(t, "chattr")
	img := mkImage(t, mixedSingle, qemuOEM(true))
	dir := mountImage(t, img)
	testutil.MustRun(t, "chattr", "+m", dir+"/grub.cfg")
	umount(t, dir)
	fs, dev := openImage(t, img)
	for _, c := range []struct {
		data []byte
		msg  string
	}{
		{flatcarGrub(30, openstackSettings), "the inode forbids compression"},
		{flatcarGrub(24, openstackSettings), "splitting a leaf is out of reach"},
	} {
		rec := &recorder{File: dev}
		if err := fs.write(rec, "/grub.cfg", c.data); !errors.Is(err, errUnsupported) || !strings.Contains(err.Error(), c.msg) || len(rec.writes) != 0 {
			t.Errorf("WriteFile(%d bytes) = %v with %d writes, want ErrUnsupported saying %q and none", len(c.data), err, len(rec.writes), c.msg)
		}
	}
}

// firstExtent returns the EXTENT_DATA at file offset 0 of path.
func firstExtent(t *testing.T, fs *FS, p string) fileExtent {
	t.Helper()
	in, err := fs.resolve("test", p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.lookup(fs.fsTree, key{in.ino, typeExtentData, 0})
	if err != nil || b == nil {
		t.Fatalf("%s has no extent at offset 0: %v", p, err)
	}
	e, err := parseFileExtent(b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestWriteUnsupported: every refusal wraps ErrUnsupported, says what, and changes nothing.
func TestWriteUnsupported(t *testing.T) {
	v := mixedSingle
	cases := []struct {
		name, path string
		data       []byte
		msg        string
	}{
		{"too-long-incompressible", "/grub.cfg", random(2049), "inline extent (at most 2048 stored bytes"},
		{"too-long-compressible", "/grub.cfg", bytes.Repeat([]byte("a"), 4097), "at most 4096 before zlib compression"},
		{"regular-extent", sysextPath, []byte("x"), "regular (non-inline) extents"},
		{"leaf-full", "/grub.cfg", random(2048), "splitting a leaf is out of reach"},
		{"leaf-full-even-compressed", "/grub.cfg", hexText(3500), "splitting a leaf is out of reach"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := mkImage(t, v, qemuOEM(true))
			fs, dev := openImage(t, img)
			rec := &recorder{File: dev}
			err := fs.write(rec, c.path, c.data)
			if !errors.Is(err, errUnsupported) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("WriteFile error = %v, want ErrUnsupported saying %q", err, c.msg)
			}
			if len(rec.writes) != 0 {
				t.Fatalf("a refused WriteFile wrote at %v", rec.writes)
			}
		})
	}
}

// random returns n incompressible bytes.
func random(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

// hexText returns n random hex digits, which zlib shrinks to about half.
func hexText(n int) []byte {
	b := random(n)
	for i := range b {
		b[i] = "0123456789abcdef"[b[i]%16]
	}
	return b
}

func readImage(t testing.TB, img string) []byte {
	t.Helper()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copiesAgree fails unless every copy of every FS tree leaf (two with DUP) is identical.
func copiesAgree(t *testing.T, fs *FS) {
	t.Helper()
	seen := map[uint64]bool{}
	err := fs.walk(fs.fsTree, key{}, key{maxU64, 0xff, maxU64}, func(b *block, _ int) (bool, error) {
		if seen[b.logical] {
			return true, nil
		}
		seen[b.logical] = true
		phys, err := fs.physical(b.logical, len(b.buf))
		if err != nil {
			return false, err
		}
		for _, p := range phys {
			c := make([]byte, len(b.buf))
			if _, err := fs.dev.ReadAt(c, p); err != nil {
				return false, err
			}
			if !bytes.Equal(c, b.buf) {
				t.Errorf("copy of leaf %d at device offset %d differs from the verified one", b.logical, p)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
