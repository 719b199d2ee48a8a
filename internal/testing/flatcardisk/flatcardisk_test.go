package flatcardisk

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

var fsTools = []string{"mkfs.btrfs", "mkfs.ext4", "mkfs.vfat", "mcopy", "grub-mkimage"}

// Flatcar's partitions (numbers, GPT names, type GUIDs) as FACTS lists them.
var wantParts = []struct {
	num        int
	name, guid string
}{
	{1, "EFI-SYSTEM", "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"},
	{2, "BIOS-BOOT", "21686148-6449-6E6F-744E-656564454649"},
	{3, "USR-A", "5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6"},
	{4, "USR-B", "5DFBF5F4-2848-4BAC-AA5E-0D9A20B745A6"},
	{6, "OEM", "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
	{7, "OEM-CONFIG", "C95DC21A-DF0E-4340-8D7B-26CBFA9A03E0"},
	{9, "ROOT", "3884DD41-8582-4404-B9A8-E9B84F2DF50E"},
}

func TestGPTHasFlatcarLayout(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "sgdisk")...)
	tests := []struct {
		name    string
		opts    Options
		oemSize int64
		size    int64
	}{
		{"default", Options{}, 128 * mib, 600 * mib},
		{"no OEM partition", Options{OEM: OEMNone}, 0, 600 * mib},
		{"benchmark sizes", Options{OEMSize: 1024 * mib, DiskSize: 9 * 1024 * mib}, 1024 * mib, 9 * 1024 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := Build(t, tc.opts)
			st, err := os.Stat(img)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != tc.size {
				t.Errorf("image size %d, want %d", st.Size(), tc.size)
			}
			parts := Partitions(t, img)
			var i int
			for _, w := range wantParts {
				if w.name == "OEM" && tc.oemSize == 0 {
					continue
				}
				if i >= len(parts) {
					t.Fatalf("partition %d (%s) missing; got %+v", w.num, w.name, parts)
				}
				p := parts[i]
				i++
				if p.Number != w.num || p.Name != w.name || p.TypeGUID != w.guid {
					t.Errorf("partition %d %q type %s, want %d %q type %s", p.Number, p.Name, p.TypeGUID, w.num, w.name, w.guid)
				}
				if p.Start%align != 0 || p.Size%align != 0 {
					t.Errorf("%s: start %d size %d not 2 MiB aligned", p.Name, p.Start, p.Size)
				}
				if w.name == "OEM" && p.Size != tc.oemSize {
					t.Errorf("OEM size %d, want %d", p.Size, tc.oemSize)
				}
			}
			if i != len(parts) {
				t.Errorf("unexpected extra partitions: %+v", parts[i:])
			}
			for j := 1; j < len(parts); j++ {
				if parts[j].Start < parts[j-1].Start+parts[j-1].Size {
					t.Errorf("%s overlaps %s", parts[j].Name, parts[j-1].Name)
				}
			}
			out, err := exec.Command("sgdisk", "-v", img).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "No problems found") {
				t.Errorf("sgdisk -v: %v\n%s", err, out)
			}
		})
	}
}

func TestOEMPartition(t *testing.T) {
	testutil.RequireTools(t, fsTools...)
	img := Build(t, Options{})
	start, size, err := OEMPartition(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Partitions(t, img) {
		if p.Number == 6 && (p.Start != start || p.Size != size) {
			t.Errorf("OEMPartition = %d+%d, GPT entry 6 is %d+%d", start, size, p.Start, p.Size)
		}
	}
	if _, _, err := OEMPartition(Build(t, Options{OEM: OEMNone})); err == nil || !strings.Contains(err.Error(), `no partition named "OEM"`) {
		t.Errorf("OEMPartition without OEM: err = %v", err)
	}
}

// grubCat reads a file through GRUB's own filesystem drivers, as the boot loader will.
func grubCat(t *testing.T, img, path string) ([]byte, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	out, err := exec.Command("grub-fstest", img, "cp", path, dst).CombinedOutput()
	if err != nil {
		return nil, &exec.ExitError{Stderr: out}
	}
	return os.ReadFile(dst)
}

func grubLs(t *testing.T, img, dir string) []string {
	t.Helper()
	out, err := exec.Command("grub-fstest", img, "ls", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("grub-fstest ls %s: %v\n%s", dir, err, out)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	return names
}

func TestOEMContentsReadableByGRUBAndClean(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "grub-fstest", "btrfs", "e2fsck")...)
	custom := "set oem_id=\"openstack\"\n"
	tests := []struct {
		name string
		opts Options
	}{
		{"btrfs", Options{OEM: OEMBtrfs}},
		{"btrfs-dup", Options{OEM: OEMBtrfsDup}},
		{"btrfs-kernel-zlib", Options{OEM: OEMBtrfsKernelZlib}},
		{"ext4", Options{OEM: OEMExt4}},
		{"btrfs without grub.cfg", Options{NoGrubCfg: true}},
		{"ext4 without grub.cfg", Options{OEM: OEMExt4, NoGrubCfg: true}},
		{"btrfs custom grub.cfg and config.ign", Options{GrubCfg: custom, ExtraOEMFiles: map[string][]byte{"config.ign": []byte(`{"ignition":{"version":"3.3.0"}}`)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := Build(t, tc.opts)
			want := OEMFiles(tc.opts)
			for name, data := range want {
				got, err := grubCat(t, img, "(loop0,gpt6)/"+name)
				if err != nil {
					t.Errorf("GRUB cannot read %s: %v", name, err)
				} else if !bytes.Equal(got, data) {
					t.Errorf("%s: GRUB reads %q, want %q", name, got, data)
				}
			}
			_, hasCfg := want["grub.cfg"]
			if hasCfg == tc.opts.NoGrubCfg {
				t.Errorf("OEMFiles has grub.cfg = %t with NoGrubCfg = %t", hasCfg, tc.opts.NoGrubCfg)
			}
			top := map[string]bool{}
			for name := range want {
				first, _, isDir := strings.Cut(name, "/")
				if isDir {
					first += "/"
				}
				top[first] = true
			}
			if tc.opts.OEM == OEMExt4 {
				top["lost+found/"] = true
			}
			var wantTop []string
			for n := range top {
				wantTop = append(wantTop, n)
			}
			sort.Strings(wantTop)
			if got := grubLs(t, img, "(loop0,gpt6)/"); strings.Join(got, " ") != strings.Join(wantTop, " ") {
				t.Errorf("OEM root holds %v, want %v", got, wantTop)
			}
			if tc.opts.GrubCfg == "" && !tc.opts.NoGrubCfg {
				if cfg := string(want["grub.cfg"]); !strings.Contains(cfg, `set oem_id="qemu"`) || !strings.Contains(cfg, `set linux_append="flatcar.autologin"`) {
					t.Errorf("default grub.cfg lacks the qemu settings:\n%s", cfg)
				}
			}

			fs := ExtractPartition(t, img, "OEM")
			var check *exec.Cmd
			if tc.opts.OEM == OEMExt4 {
				check = exec.Command("e2fsck", "-fn", fs)
			} else {
				check = exec.Command("btrfs", "check", "--readonly", fs)
			}
			if out, err := check.CombinedOutput(); err != nil {
				t.Errorf("%v: %v\n%s", check.Args, err, out)
			}
			label, _ := exec.Command("blkid", "-o", "value", "-s", "LABEL", fs).Output()
			if strings.TrimSpace(string(label)) != "OEM" {
				t.Errorf("filesystem label %q, want OEM", label)
			}
		})
	}
}

// grubCfgInode finds grub.cfg's inode number in its DIR_ITEM of a dump-tree listing.
var grubCfgInode = regexp.MustCompile(`location key \((\d+) INODE_ITEM 0\) type FILE\n[^\n]*\n\s*name: grub\.cfg\n`)

// TestBtrfsOnDiskShapes checks what the variants exist for: how btrfs stores grub.cfg.
func TestBtrfsOnDiskShapes(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "btrfs")...)
	tests := []struct {
		opts Options
		tree string // btrfs inspect-internal dump-tree -t
		want []string
	}{
		{Options{OEM: OEMBtrfs}, "fs", []string{"compression 0 (none)", "type 0 (inline)"}},
		{Options{OEM: OEMBtrfs}, "chunk", []string{"type DATA|METADATA"}},
		{Options{OEM: OEMBtrfsDup}, "chunk", []string{"type METADATA|DUP", "num_stripes 2"}},
		{Options{OEM: OEMBtrfsKernelZlib}, "fs", []string{"inline extent data size", "compression 1 (zlib)"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.opts.OEM)+"/"+tc.tree, func(t *testing.T) {
			fs := ExtractPartition(t, Build(t, tc.opts), "OEM")
			out, err := exec.Command("btrfs", "inspect-internal", "dump-tree", "-t", tc.tree, fs).CombinedOutput()
			if err != nil {
				t.Fatalf("dump-tree: %v\n%s", err, out)
			}
			// grub.cfg's DIR_ITEM names its inode ("location key (N INODE_ITEM 0)"); the extent is
			// that inode's EXTENT_DATA item. (The next EXTENT_DATA in the tree can be another
			// file's: the kernel does not number inodes in the order the files were copied.)
			text := string(out)
			if tc.tree == "fs" {
				m := grubCfgInode.FindStringSubmatch(text)
				if m == nil {
					t.Fatalf("no grub.cfg directory entry in the fs tree:\n%s", text)
				}
				i := strings.Index(text, "key ("+m[1]+" EXTENT_DATA 0)")
				if i < 0 {
					t.Fatalf("no EXTENT_DATA of grub.cfg (inode %s) in the fs tree:\n%s", m[1], text)
				}
				text = text[i:min(len(text), i+300)]
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("dump-tree -t %s lacks %q:\n%s", tc.tree, w, text)
				}
			}
		})
	}
}

func TestESPAndFirstBoot(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "grub-fstest")...)
	for _, first := range []bool{false, true} {
		img := Build(t, Options{FirstBoot: first})
		names := grubLs(t, img, "(loop0,gpt1)/flatcar/")
		has := strings.Contains(strings.Join(names, " "), "first_boot")
		if has != first {
			t.Errorf("FirstBoot=%t: ESP /flatcar holds %v", first, names)
		}
		cfg, err := grubCat(t, img, "(loop0,gpt1)/flatcar/grub/grub.cfg")
		if err != nil || string(cfg) != MainGrubCfg() {
			t.Errorf("ESP grub.cfg: %v %q", err, cfg)
		}
		// FAT32 (go-diskfs reads only FAT32), label EFI-SYSTEM.
		start := Partitions(t, img)[0].Start
		boot := make([]byte, 512)
		f, _ := os.Open(img)
		f.ReadAt(boot, start)
		f.Close()
		if string(boot[82:90]) != "FAT32   " || string(boot[71:82]) != "EFI-SYSTEM " {
			t.Errorf("ESP boot sector: type %q label %q", boot[82:90], boot[71:82])
		}
	}
}

func TestMBR(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "sgdisk")...)
	readMBR := func(path string) (disk.MBRInfo, []byte) {
		img, err := disk.Open(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		info, err := disk.ReadMBR(img)
		if err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, 512)
		img.ReadAt(raw, 0)
		return info, raw
	}
	plain := Build(t, Options{})
	if info, _ := readMBR(plain); info.Kind != disk.MBRProtective {
		t.Errorf("default MBR is %s, want protective", info.Kind)
	}
	info, ours := readMBR(Build(t, Options{HybridMBR: true}))
	if info.Kind != disk.MBRHybrid || strings.Join(info.Types, ",") != "ee,ef" {
		t.Errorf("hybrid MBR: %+v", info)
	}
	// The entries are those `sgdisk -h 1` writes, with the ESP entry marked active.
	testutil.MustRun(t, "sgdisk", "-h", "1", plain)
	_, theirs := readMBR(plain)
	if ours[446+16] != 0x80 {
		t.Errorf("ESP entry status %#x, want 0x80", ours[446+16])
	}
	ours[446+16] = 0
	if !bytes.Equal(ours[446:], theirs[446:]) {
		t.Errorf("hybrid MBR entries\n ours   % x\n sgdisk % x", ours[446:], theirs[446:])
	}
}

func TestBootableHasGRUBKernelAndInitramfs(t *testing.T) {
	testutil.RequireTools(t, append(fsTools, "grub-fstest")...)
	img := Build(t, Options{Bootable: true})
	names := strings.Join(grubLs(t, img, "(loop0,gpt1)/flatcar/"), " ")
	for _, n := range []string{"vmlinuz-a", "initrd-a", "grub/"} {
		if !strings.Contains(names, n) {
			t.Errorf("ESP /flatcar lacks %s: %s", n, names)
		}
	}
	if got := grubLs(t, img, "(loop0,gpt1)/EFI/boot/"); strings.Join(got, " ") != "bootx64.efi" {
		t.Errorf("ESP /EFI/boot holds %v", got)
	}
	var biosBoot disk.Partition
	for _, p := range Partitions(t, img) {
		if p.Name == "BIOS-BOOT" {
			biosBoot = p
		}
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mbr := make([]byte, 512)
	core := make([]byte, 512)
	f.ReadAt(mbr, 0)
	f.ReadAt(core, biosBoot.Start)
	lba := uint64(biosBoot.Start / 512)
	if got := binary.LittleEndian.Uint64(mbr[0x5c:]); got != lba {
		t.Errorf("boot.img kernel_sector %d, want BIOS-BOOT's LBA %d", got, lba)
	}
	if got := binary.LittleEndian.Uint64(core[500:]); got != lba+1 {
		t.Errorf("core.img blocklist start %d, want %d", got, lba+1)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xAA || mbr[446+4] != 0xEE {
		t.Errorf("boot code clobbered the partition table: % x", mbr[446:])
	}
}

func TestBuildReturnsIndependentSparseCopies(t *testing.T) {
	testutil.RequireTools(t, fsTools...)
	a := Build(t, Options{})
	b := Build(t, Options{})
	if a == b {
		t.Fatal("Build returned the same path twice")
	}
	f, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("scribble"), 1<<20)
	f.Close()
	c := Build(t, Options{})
	buf := make([]byte, 8)
	g, _ := os.Open(c)
	g.ReadAt(buf, 1<<20)
	g.Close()
	if string(buf) == "scribble" {
		t.Error("a change to one copy shows in the next Build")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(b, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > st.Size/10 {
		t.Errorf("copy uses %d bytes on disk for %d: not sparse", used, st.Size)
	}
}

func TestBuildToRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{{OEM: "xfs"}, {OEMSize: 3 * mib}, {DiskSize: 100 * mib}} {
		if err := BuildTo(filepath.Join(dir, "x.img"), o); err == nil {
			t.Errorf("BuildTo(%+v) succeeded", o)
		}
	}
}
