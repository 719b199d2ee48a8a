package btrfs

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Contents of a Flatcar qemu OEM partition.
const (
	qemuGrub       = "# Flatcar GRUB settings\n\nset oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n"
	qemuOEMRelease = "ID=qemu\nVERSION_ID=4459.2.1\nNAME=\"Qemu\"\nHOME_URL=\"https://www.qemu.org/\"\nBUG_REPORT_URL=\"https://issues.flatcar.org\"\n"
	sysextPath     = "/sysext/oem-qemu-4459.2.1.raw"
)

// oemFiles is the expected content of every file in an OEM image, by path.
type oemFiles map[string][]byte

func qemuOEM(withGrub bool) oemFiles {
	raw := make([]byte, 12<<10)
	rand.New(rand.NewSource(1)).Read(raw) // incompressible, so mkfs stores a regular extent
	f := oemFiles{"/oem-release": []byte(qemuOEMRelease), sysextPath: raw, "/sysext/active-oem-qemu": {}}
	if withGrub {
		f["/grub.cfg"] = []byte(qemuGrub)
	}
	return f
}

// variant is one way mkfs.btrfs lays out an OEM filesystem.
type variant struct {
	name     string
	mkfsArgs []string
	grub     bool
	size     int64
}

var (
	mixedSingle = variant{"mixed-single", []string{"--mixed", "-m", "single", "-d", "single"}, true, 128 << 20}
	// mkfs needs more than 128 MiB for mixed DUP.
	mixedDup    = variant{"mixed-dup", []string{"--mixed", "-m", "dup", "-d", "dup"}, true, 256 << 20}
	defaultDup  = variant{"default-dup-metadata", nil, true, 256 << 20}
	mixedNoGrub = variant{"mixed-no-grub", mixedSingle.mkfsArgs, false, 128 << 20}
	// What older btrfs-progs (early Flatcar OEMs) made: explicit holes, no free space tree.
	mixedLegacy = variant{"mixed-legacy-features", append([]string{"-O", "^no-holes", "-R", "^free-space-tree"}, mixedSingle.mkfsArgs...), true, 128 << 20}

	variants = []variant{mixedSingle, mixedDup, defaultDup, mixedNoGrub, mixedLegacy}
)

// mkImage builds a sparse filesystem image holding files with the real mkfs.btrfs.
func mkImage(t testing.TB, v variant, files oemFiles) string {
	t.Helper()
	testutil.RequireTools(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "oem.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, v.size); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-q", "-f", "-L", "OEM", "--rootdir", root}, v.mkfsArgs...)
	testutil.MustRun(t, "mkfs.btrfs", append(args, img)...)
	return img
}

// openImage opens img read-write and the filesystem on it.
func openImage(t testing.TB, img string) (*FS, *os.File) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Open(f, st.Size())
	if err != nil {
		t.Fatalf("Open(%s): %v", img, err)
	}
	return fs, f
}

// btrfsCheck fails the test unless `btrfs check --readonly` finds nothing wrong, in both its
// original and its lowmem mode (they check different things).
func btrfsCheck(t testing.TB, img string) {
	t.Helper()
	for _, mode := range []string{"original", "lowmem"} {
		if out := testutil.MustRun(t, "btrfs", "check", "--readonly", "--mode", mode, img); !strings.Contains(out, "no error found") {
			t.Fatalf("btrfs check --readonly --mode %s %s:\n%s", mode, img, out)
		}
	}
}

// restoreFiles extracts img with `btrfs restore`, a reader that shares no code with the kernel
// or with this package, and returns every regular file by path.
func restoreFiles(t testing.TB, img string) oemFiles {
	t.Helper()
	dir := t.TempDir()
	testutil.MustRun(t, "btrfs", "restore", img, dir)
	return collect(t, dir)
}

func collect(t testing.TB, dir string) oemFiles {
	t.Helper()
	got := oemFiles{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		got["/"+filepath.ToSlash(strings.TrimPrefix(p, dir+"/"))] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sameFiles fails unless got holds exactly the files of want.
func sameFiles(t testing.TB, who string, got, want oemFiles) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: %s missing", who, p)
		} else if !bytes.Equal(g, w) {
			t.Errorf("%s: %s = %q..., want %q...", who, p, g[:min(len(g), 80)], w[:min(len(w), 80)])
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected file %s", who, p)
		}
	}
}

// readAllFS reads every file of want through fs.
func readAllFS(t testing.TB, fs *FS, want oemFiles) oemFiles {
	t.Helper()
	got := oemFiles{}
	for p := range want {
		data, err := fs.read(p)
		if err != nil {
			t.Errorf("ReadFile(%s): %v", p, err)
			continue
		}
		got[p] = data
	}
	return got
}
