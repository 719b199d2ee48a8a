package disk_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/filesystem/ext4/crc"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

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
	if out, err := exec.Command("mkfs.ext4", "-q", "-L", "USR-A", "-d", tree, usr, "16M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
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
			if out, err := exec.Command("cp", "--sparse=always", c.base, img).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
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
