package cli_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// setGPTRange rewrites the first and last LBA of GPT entry number in both the primary and the
// backup table, with valid checksums: a crafted image, not a damaged one.
func setGPTRange(t *testing.T, path string, number int, first, last func(first, last uint64) uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 512)
	if _, err := f.ReadAt(hdr, 512); err != nil {
		t.Fatal(err)
	}
	backupLBA := int64(binary.LittleEndian.Uint64(hdr[32:]))
	for _, lba := range []int64{1, backupLBA} {
		if _, err := f.ReadAt(hdr, lba*512); err != nil {
			t.Fatal(err)
		}
		arrLBA := int64(binary.LittleEndian.Uint64(hdr[72:]))
		count, size := binary.LittleEndian.Uint32(hdr[80:]), binary.LittleEndian.Uint32(hdr[84:])
		arr := make([]byte, count*size)
		if _, err := f.ReadAt(arr, arrLBA*512); err != nil {
			t.Fatal(err)
		}
		e := arr[(number-1)*int(size):]
		a, b := binary.LittleEndian.Uint64(e[32:]), binary.LittleEndian.Uint64(e[40:])
		binary.LittleEndian.PutUint64(e[32:], first(a, b))
		binary.LittleEndian.PutUint64(e[40:], last(a, b))
		binary.LittleEndian.PutUint32(hdr[88:], crc32.ChecksumIEEE(arr))
		hs := binary.LittleEndian.Uint32(hdr[12:])
		binary.LittleEndian.PutUint32(hdr[16:], 0)
		binary.LittleEndian.PutUint32(hdr[16:], crc32.ChecksumIEEE(hdr[:hs]))
		if _, err := f.WriteAt(arr, arrLBA*512); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(hdr, lba*512); err != nil {
			t.Fatal(err)
		}
	}
}

// gptEntryLBAs returns entry number's first and last LBA from the primary table.
func gptEntryLBAs(t *testing.T, path string, number int) (uint64, uint64) {
	t.Helper()
	var first, last uint64
	setGPTRange(t, path, number, func(a, _ uint64) uint64 { first = a; return a }, func(_, b uint64) uint64 { last = b; return b })
	return first, last
}

// A GPT whose checksums hold but whose OEM partition covers ROOT, or whose ROOT runs over the
// backup table, is refused by every command that reads partitions (inspect passed it as a
// WARNING and build --base-image wrote ROOT inside OEM's range).
func TestHostileGPTLayouts(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	rootFirst, rootLast := gptEntryLBAs(t, base, 9)
	st, err := os.Stat(base)
	if err != nil {
		t.Fatal(err)
	}
	backupArray := uint64(st.Size()/512 - 2) // inside the backup partition array
	prebuilt := filepath.Join(t.TempDir(), "kubernetes.raw")
	testutil.Run(t, append([]string{"sysext", "create", "--kubernetes-version", "v1.33.4", "--output-file", prebuilt},
		kubetest.New(t, kubernetes.Options{}).Args()...)...).MustSucceed(t)
	cases := []struct {
		name   string
		number int
		first  func(a, b uint64) uint64
		last   func(a, b uint64) uint64
		want   string
	}{
		{"OEM covers ROOT", 6, func(uint64, uint64) uint64 { return rootFirst }, func(uint64, uint64) uint64 { return rootLast }, "(ROOT, LBA"},
		{"ROOT over the backup table", 9, func(a, _ uint64) uint64 { return a }, func(uint64, uint64) uint64 { return backupArray }, "outside the usable LBA range"},
		{"ESP over the primary table", 1, func(uint64, uint64) uint64 { return 2 }, func(_, b uint64) uint64 { return b }, "outside the usable LBA range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
			setGPTRange(t, img, c.number, c.first, c.last)
			before := testutil.SHA256File(t, img)
			dir := t.TempDir()
			runs := [][]string{
				{"inspect", img},
				{"oem", "set", img, "--id", "openstack"},
				{"oem", "set", img, "--id", "openstack", "--output-file", filepath.Join(dir, "o.raw")},
				{"build", "--method", "sysext", "--base-image", img, "--version", "4459.2.0", "--kubernetes-version", "v1.33.4",
					"--sysext", prebuilt, "--no-preload-images", "--output-dir", filepath.Join(dir, "out"), "--cache-dir", filepath.Join(dir, "cache"),
					"--kubernetes-mirror", "http://127.0.0.1:9/release", "--github-mirror", "http://127.0.0.1:9"},
			}
			for _, args := range runs {
				r := testutil.Run(t, args...)
				if r.Code != 1 || !strings.Contains(r.Stderr, "invalid GPT layout") || !strings.Contains(r.Stderr, c.want) {
					t.Errorf("%s: exit %d, want 1 with %q:\n%s", strings.Join(args[:2], " "), r.Code, c.want, r.Combined())
				}
			}
			if testutil.SHA256File(t, img) != before {
				t.Error("the image was changed")
			}
			if left := listDir(t, dir); left != "" { // build's output directory keeps only its lock
				t.Errorf("left behind: %s", left)
			}
		})
	}
}

// A crafted OEM grub.cfg (40 self-doubling lines made inspect run out of memory; 100k
// self-appending lines took over a minute) is refused in well under a second by every command
// that reads it, with a message that says which bound it broke.
func TestHostileGrubCfg(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs")
	testutil.Binary(t) // built before the timed runs
	cases := []struct {
		name, cfg, want string
	}{
		{"40 doubling lines", `set linux_append="x"` + "\n" + strings.Repeat(`set linux_append="$linux_append$linux_append"`+"\n", 40),
			"grub.cfg line 15: $linux_append would expand to more than 8192 bytes"},
		{"100k self-appending lines", strings.Repeat(`set linux_append="$linux_append a"`+"\n", 100000),
			"bytes, more than the 65536 flatcar-capo reads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, GrubCfg: c.cfg})
			before := testutil.SHA256File(t, img)
			out := filepath.Join(t.TempDir(), "o.raw")
			for _, args := range [][]string{
				{"inspect", img},
				{"oem", "show", img},
				{"oem", "set", img, "--id", "openstack"},
				{"oem", "set", img, "--id", "openstack", "--output-file", out},
			} {
				start := time.Now()
				r := testutil.Run(t, args...)
				took := time.Since(start)
				if r.Code != 1 || !strings.Contains(r.Stderr, c.want) || !strings.Contains(r.Stderr, "crafted OEM partition") {
					t.Errorf("%s: exit %d, want 1 with %q:\n%s", strings.Join(args[:2], " "), r.Code, c.want, r.Combined())
				}
				if took > 5*time.Second { // milliseconds idle; generous for a loaded CI runner
					t.Errorf("%s took %v", strings.Join(args[:2], " "), took)
				}
				t.Logf("%s: %v", strings.Join(args[:2], " "), took)
			}
			if testutil.SHA256File(t, img) != before {
				t.Error("the image was changed")
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("an output was written: %v", err)
			}
		})
	}
}
