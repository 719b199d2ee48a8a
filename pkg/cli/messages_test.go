package cli_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// Messages that once lost their cause: each names what was really wrong, driving the binary.

// qcow2Of converts raw to a qcow2 (64 KiB clusters) with the binary and returns its bytes.
func qcow2Of(t *testing.T, raw string) (string, []byte) {
	t.Helper()
	q := raw + ".qcow2"
	testutil.Run(t, "convert", raw, q).MustSucceed(t)
	b, err := os.ReadFile(q)
	if err != nil {
		t.Fatal(err)
	}
	return q, b
}

// setL2 sets the qcow2 L2 entry of the cluster holding guest offset off (in the first 512 MiB)
// to entry(cluster0), cluster0 being the entry of the first cluster, and writes the file.
func setL2(t *testing.T, q string, b []byte, off int64, entry func(cluster0 uint64) uint64) {
	t.Helper()
	be := binary.BigEndian
	l1 := be.Uint64(b[40:])
	l2 := be.Uint64(b[l1:]) &^ (1 << 63)
	if l2 == 0 {
		t.Fatal("no L2 table for the first 512 MiB")
	}
	be.PutUint64(b[l2+uint64(off>>16)*8:], entry(be.Uint64(b[l2:])&^(1<<63)))
	if err := os.WriteFile(q, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pastTheEnd is an L2 entry of a truncated or crafted image.
func pastTheEnd(uint64) uint64 { return 1<<63 | 1<<40 }

func wantMessage(t *testing.T, r testutil.Result, code int, want []string, notWant ...string) {
	t.Helper()
	out := r.Combined()
	ok := r.Code == code
	for _, w := range want {
		ok = ok && strings.Contains(out, w)
	}
	for _, w := range notWant {
		ok = ok && !strings.Contains(out, w)
	}
	if !ok {
		t.Fatalf("exit %d, want %d with %q and none of %q:\n%s", r.Code, code, want, notWant, out)
	}
}

// A qcow2 whose first cluster maps past the end of the file: inspect said "image too small"
// (or "cannot read the MBR"); it says what qcow2 found.
func TestInspectCorruptQcow2SaysWhatQcow2Found(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "d.raw")
	writeRaw(t, raw, 64<<20)
	q, b := qcow2Of(t, raw)
	setL2(t, q, b, 0, pastTheEnd)
	wantMessage(t, testutil.Run(t, "inspect", q), 1,
		[]string{"corrupt qcow2 image", "points past the end of the file"}, "image too small", "cannot read the MBR")
}

// A valid 1 EiB qcow2 (qemu-img makes one with 2 MiB clusters) is too large, not corrupt.
func TestInspectHugeQcow2IsTooLargeNotCorrupt(t *testing.T) {
	testutil.RequireTool(t, "qemu-img")
	q := filepath.Join(t.TempDir(), "eib.qcow2")
	testutil.QemuImg(t, "create", "-f", "qcow2", "-o", "cluster_size=2M", q, "1E")
	wantMessage(t, testutil.Run(t, "inspect", q), 1, []string{"is too large, not supported"}, "corrupt")
}

// oem set --output-file of an input whose OEM partition holds no filesystem blamed the output
// file (the work copy carried its name); the input is what is wrong.
func TestOemSetBlamesTheInputNotTheOutput(t *testing.T) {
	testutil.RequireTool(t, "sgdisk")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.raw")
	writeFile(t, in, "")
	if err := os.Truncate(in, 64<<20); err != nil {
		t.Fatal(err)
	}
	testutil.MustRun(t, "sgdisk", "-n", "6:2048:+8M", "-c", "6:OEM", in)
	out := filepath.Join(dir, "out.raw")
	wantMessage(t, testutil.Run(t, "oem", "set", in, "--id", "openstack", "--output-file", out), 1,
		[]string{"Error: " + in + ": partition 6 (OEM) has an unknown filesystem"}, "Error: "+out)
}

// A USR-A that cannot be read (its qcow2 cluster does not decode) was reported as "the OEM
// partition has an unknown filesystem"; inspect names USR-A and the qcow2 error.
func TestInspectUSRAReadFailureNamesUSRA(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	d, err := disk.Open(img, false)
	if err != nil {
		t.Fatal(err)
	}
	usr, err := d.FindPartition("USR-A")
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	q, b := qcow2Of(t, img)
	// USR-A's superblock cluster becomes a "compressed" one over cluster 0's plain data: a read
	// of it fails (an entry past the file would already fail when its L2 table is loaded).
	setL2(t, q, b, usr.Start+0x10000, func(c0 uint64) uint64 { return 1<<62 | c0 })
	wantMessage(t, testutil.Run(t, "inspect", q, "--for", "qemu"), 0,
		[]string{"USR-A is not readable (partition 3 (USR-A): reading the btrfs superblock: corrupt qcow2 image"}, "OEM partition has an unknown filesystem")
}

// build --output-dir naming an existing file is refused before any step runs.
func TestBuildOutputDirThatIsAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out")
	writeFile(t, file, "")
	wantMessage(t, testutil.Run(t, "build", "--method", "sysext", "--base-image", filepath.Join(dir, "none.img"), "--version", "4459.2.0",
		"--kubernetes-version", "v1.33.4", "--output-dir", file), 2,
		[]string{"Error: --output-dir " + file + " is an existing file, not a directory"}, "[1/")
}

// An output path that is an existing directory was caught only by the final rename, after all
// the work; a missing directory was reported with the temporary file's name. Every command with
// an output path checks both first (dead mirrors and servers prove no work was tried).
func TestOutputPathCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "d.raw")
	writeRaw(t, raw, 8<<20)
	dead := "http://127.0.0.1:9"
	commands := map[string]func(out string) []string{
		"convert": func(out string) []string { return []string{"convert", raw, out, "--to", "raw"} },
		"oem set": func(out string) []string {
			return []string{"oem", "set", raw, "--id", "openstack", "--output-file", out}
		},
		"fetch": func(out string) []string {
			return []string{"fetch", "--version", "4230.2.3", "--release-server", dead, "--output-file", out}
		},
		"sysext": func(out string) []string {
			return []string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--kubernetes-mirror", dead + "/release", "--github-mirror", dead, "--output-file", out}
		},
		"manifest": func(out string) []string {
			return []string{"manifests", "--kubernetes-version", "v1.33.4", "--output-file", out}
		},
	}
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, args := range commands {
		t.Run(name+"/existing directory", func(t *testing.T) {
			wantMessage(t, testutil.Run(t, args(existing)...), 2, []string{"Error: " + existing + " is an existing directory"}, dead)
			if ents, _ := os.ReadDir(dir); len(ents) != 2 {
				t.Errorf("left behind: %v", ents)
			}
		})
		t.Run(name+"/missing directory", func(t *testing.T) {
			out := filepath.Join(dir, "missing", "out.img")
			wantMessage(t, testutil.Run(t, args(out)...), 2,
				[]string{"cannot write " + out + ": its directory " + filepath.Dir(out) + " does not exist"}, ".tmp-", dead)
		})
	}
}
