package cli_test

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/ext4/crc"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
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

// guarded runs the binary with a time and an address-space bound: a crafted image used to make
// go-diskfs divide by zero or ask for a 128 GiB table, and neither may take a CI runner down.
var guarded = []string{"timeout", "-s", "KILL", "600", "prlimit", "--as=8589934592", "--"}

// TestCraftedFilesystemsNeverCrash: images made by the real mkfs tools, then crafted where
// go-diskfs trusts them (an ext4 superblock with 0 blocks per group and a valid checksum, a FAT32
// boot sector whose FAT is 128 GiB), go through every command that reads that partition (oem
// show and set, inspect, build --method sysext --base-image); each ends in a clear outcome
// naming the partition, never a panic, a fatal error or a hang.
func TestCraftedFilesystemsNeverCrash(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "mkfs.vfat", "mcopy", "timeout", "prlimit")
	dir := t.TempDir()
	tree := filepath.Join(dir, "usr")
	os.MkdirAll(filepath.Join(tree, "lib"), 0o755)
	os.WriteFile(filepath.Join(tree, "lib", "os-release"), []byte("ID=flatcar\nVERSION_ID=4459.2.0\nSYSEXT_LEVEL=1.0\n"), 0o644)
	usr := filepath.Join(dir, "usr.ext4")
	testutil.MustRun(t, "mkfs.ext4", "-q", "-L", "USR-A", "-d", tree, usr, "16M")
	ext4OEM := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMExt4, USRAImage: usr, FirstBoot: true})
	btrfsOEM := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})

	var mirror *kubetest.Mirror
	build := func(img string) []string {
		if mirror == nil {
			mirror = kubetest.New(t, kubernetes.Options{})
		}
		a := []string{"build", "--method", "sysext", "--no-preload-images", "--base-image", img, "--version", "4459.2.0",
			"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", filepath.Join(t.TempDir(), "out")}
		return append(a, mirror.Args()...)
	}
	inspect := func(img string) []string { return []string{"inspect", "-o", "json", img} }
	oemShow := func(img string) []string { return []string{"oem", "show", img} }
	oemSet := func(img string) []string {
		return []string{"oem", "set", img, "--id", "openstack", "--output-file", filepath.Join(t.TempDir(), "out.raw")}
	}

	cases := []struct {
		name      string
		base      string
		partition string
		craft     func(t *testing.T, img string, p disk.Partition)
		runs      []func(string) []string
		code      int // 0: the command reports and goes on (its verdict's exit code, 0 or 1)
	}{
		{"OEM ext4 superblock", ext4OEM, "OEM", zeroBlocksPerGroup, []func(string) []string{oemShow, oemSet, inspect}, 1},
		{"USR-A ext4 superblock", ext4OEM, "USR-A", zeroBlocksPerGroup, []func(string) []string{inspect}, 0},
		{"ESP FAT size", btrfsOEM, "EFI-SYSTEM", hugeFAT, []func(string) []string{inspect}, 0},
		{"ROOT ext4 superblock", btrfsOEM, "ROOT", zeroBlocksPerGroup, []func(string) []string{inspect, build}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "crafted.img")
			testutil.MustRun(t, "cp", "--sparse=always", c.base, img)
			d, err := disk.Open(img, false)
			if err != nil {
				t.Fatal(err)
			}
			p, err := d.FindPartition(c.partition)
			d.Close()
			if err != nil {
				t.Fatal(err)
			}
			c.craft(t, img, p)
			name := disk.PartitionName(p)
			for _, args := range c.runs {
				argv := args(img)
				if argv[0] == "inspect" && c.code == 1 && c.partition == "ROOT" {
					// inspect reports an unreadable ROOT in the report and carries on.
					res := testutil.RunCmd(t, testutil.Cmd{Args: argv, Prefix: guarded})
					noCrash(t, argv, res)
					if !strings.Contains(res.Combined(), name) {
						t.Errorf("%v does not name %s:\n%s", argv, name, res.Combined())
					}
					continue
				}
				res := testutil.RunCmd(t, testutil.Cmd{Args: argv, Prefix: guarded})
				noCrash(t, argv, res)
				if c.code == 1 && res.Code != 1 || c.code == 0 && res.Code != 0 && res.Code != 1 {
					t.Errorf("%v: exit code %d, want %d\n%s", argv, res.Code, c.code, res.Combined())
				}
				if !strings.Contains(res.Combined(), name) {
					t.Errorf("%v does not name %s:\n%s", argv, name, res.Combined())
				}
			}
		})
	}
}

func noCrash(t *testing.T, argv []string, res testutil.Result) {
	t.Helper()
	out := res.Combined()
	if res.Code == 137 || res.Code == 2 || strings.Contains(out, "goroutine ") || strings.Contains(out, "fatal error") || strings.Contains(out, "panic:") {
		t.Fatalf("%v crashed or hung (exit %d):\n%.3000s", argv, res.Code, out)
	}
}

// zeroBlocksPerGroup sets s_blocks_per_group of the ext4 on p to 0 and reseals the superblock
// checksum, so only a reader that checks the value refuses it (go-diskfs divided by it).
func zeroBlocksPerGroup(t *testing.T, img string, p disk.Partition) {
	t.Helper()
	testutil.PatchFile(t, img, p.Start+1024, 1024, func(sb []byte) {
		if binary.LittleEndian.Uint16(sb[0x38:]) != 0xEF53 {
			t.Fatalf("%s holds no ext4", disk.PartitionName(p))
		}
		binary.LittleEndian.PutUint32(sb[0x20:], 0)
		if binary.LittleEndian.Uint32(sb[0x64:])&0x400 != 0 { // metadata_csum
			binary.LittleEndian.PutUint32(sb[0x3fc:], crc.CRC32c(0xffffffff, sb[:0x3fc]))
		}
	})
}

// hugeFAT makes the FAT32 on p claim a FAT of 2^28 sectors (128 GiB).
func hugeFAT(t *testing.T, img string, p disk.Partition) {
	t.Helper()
	testutil.PatchFile(t, img, p.Start, 512, func(bs []byte) {
		if binary.LittleEndian.Uint16(bs[0x16:]) != 0 || string(bs[0x52:0x57]) != "FAT32" {
			t.Fatalf("%s holds no FAT32", disk.PartitionName(p))
		}
		binary.LittleEndian.PutUint32(bs[0x24:], 1<<28-1)
	})
}
