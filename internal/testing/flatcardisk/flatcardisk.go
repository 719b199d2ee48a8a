// Package flatcardisk builds raw disk images laid out like Flatcar's (GPT names, type GUIDs,
// partition numbers 1,2,3,4,6,7,9 and 2 MiB alignment from testdata/flatcar-disk-layout.json,
// scaled-down sizes) with the OEM partition of a qemu image, for tests, the demo and benchmarks.
// Everything is made without root (mkfs into plain files, sparse copies), except the
// btrfs-kernel-zlib OEM, whose files the kernel writes through a loop mount.
package flatcardisk

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// OEMKind selects the OEM partition's filesystem.
type OEMKind string

const (
	OEMBtrfs           OEMKind = "btrfs"             // mkfs.btrfs --mixed -m single -d single (Flatcar's); the default
	OEMBtrfsDup        OEMKind = "btrfs-dup"         // mkfs.btrfs -m dup -d single: two copies of every tree block
	OEMBtrfsKernelZlib OEMKind = "btrfs-kernel-zlib" // files written by the kernel with compress=zlib; root only
	OEMExt4            OEMKind = "ext4"              // mkfs.ext4 -L OEM -d (Flatcar before stable 2983.2.0)
	OEMNone            OEMKind = "none"              // no OEM partition at all
)

// Kinds lists every OEMKind (for flags and table tests).
var Kinds = []OEMKind{OEMBtrfs, OEMBtrfsDup, OEMBtrfsKernelZlib, OEMExt4, OEMNone}

// Options describe the disk. The zero value is a non-bootable 600 MiB disk with a btrfs OEM
// partition holding a qemu image's files (OEMFiles), no /flatcar/first_boot and a
// protective MBR.
type Options struct {
	OEM           OEMKind           // "" means OEMBtrfs
	NoGrubCfg     bool              // OEM partition without grub.cfg
	GrubCfg       string            // grub.cfg content; "" = DefaultGrubCfg (LongGrubCfg for btrfs-kernel-zlib)
	OEMID         string            // platform of oem-release and the OEM sysext files; "" = OEMID ("qemu")
	ExtraOEMFiles map[string][]byte // more files in the OEM partition by relative path, e.g. "config.ign"
	FirstBoot     bool              // /flatcar/first_boot on the ESP, as a fresh release image has it
	HybridMBR     bool              // hybrid MBR like Flatcar before stable 4459.2.0 (0xEE + bootable 0xEF ESP)
	Bootable      bool              // GRUB (BIOS core.img + UEFI BOOTX64.EFI), Debian kernel, busybox initramfs
	OEMSize       int64             // bytes, multiple of 2 MiB; default 128 MiB
	DiskSize      int64             // total sparse size in bytes; default 600 MiB (ROOT takes the rest)

	// For a disk that boots a real system (internal/testing/standin):
	USRASize  int64  // bytes, multiple of 2 MiB; default 64 MiB
	USRAImage string // a filesystem image file copied into USR-A (must fit); default: USR-A left empty
	RootTree  string // directory whose contents ROOT's ext4 is made from (mkfs.ext4 -d); default: empty ROOT
	Kernel    string // kernel for a Bootable disk; default: the newest /boot/vmlinuz-*
	Initramfs []byte // initramfs for a Bootable disk; default: the busybox one that prints the command line
}

const (
	defaultOEMSize  = 128 * mib
	defaultDiskSize = 600 * mib
)

func (o Options) oemSize() int64 {
	if o.OEMSize == 0 {
		return defaultOEMSize
	}
	return o.OEMSize
}

func (o Options) diskSize() int64 {
	if o.DiskSize == 0 {
		return defaultDiskSize
	}
	return o.DiskSize
}

func (o Options) usrASize() int64 {
	if o.USRASize == 0 {
		return scaledSizes["USR-A"]
	}
	return o.USRASize
}

func (o Options) validate() error {
	switch o.OEM {
	case "", OEMBtrfs, OEMBtrfsDup, OEMBtrfsKernelZlib, OEMExt4, OEMNone:
	default:
		return fmt.Errorf("unknown OEM kind %q (want one of %v)", o.OEM, Kinds)
	}
	if o.oemSize()%align != 0 || o.oemSize() < 16*mib {
		return fmt.Errorf("OEM size %d must be a multiple of 2 MiB and at least 16 MiB", o.OEMSize)
	}
	if o.usrASize()%align != 0 {
		return fmt.Errorf("USR-A size %d must be a multiple of 2 MiB", o.USRASize)
	}
	if o.diskSize()%sector != 0 {
		return fmt.Errorf("disk size %d is not a multiple of 512", o.DiskSize)
	}
	return nil
}

// tools are the programs BuildTo runs for opts.
func (o Options) tools() []string {
	tools := []string{"mkfs.vfat", "mcopy", "mkfs.ext4"}
	switch o.OEM {
	case "", OEMBtrfs, OEMBtrfsDup:
		tools = append(tools, "mkfs.btrfs")
	case OEMBtrfsKernelZlib:
		tools = append(tools, "mkfs.btrfs", "mount", "umount")
	}
	if o.Bootable {
		tools = append(tools, "grub-mkimage")
	}
	return tools
}

// key identifies identical builds for the cache.
func (o Options) key() string {
	if o.OEM == "" {
		o.OEM = OEMBtrfs
	}
	names := slices.Sorted(maps.Keys(o.ExtraOEMFiles))
	k := fmt.Sprintf("%s|%t|%q|%t|%t|%t|%d|%d", o.OEM, o.NoGrubCfg, o.GrubCfg, o.FirstBoot, o.HybridMBR, o.Bootable, o.oemSize(), o.diskSize())
	k += fmt.Sprintf("|%d|%q|%q|%q|%x|%q", o.usrASize(), o.USRAImage, o.RootTree, o.Kernel, sha256.Sum256(o.Initramfs), o.OEMID)
	for _, n := range names {
		k += fmt.Sprintf("|%q=%q", n, o.ExtraOEMFiles[n])
	}
	return k
}

// BuildTo builds the disk image at path (replacing it).
func BuildTo(path string, opts Options) error {
	if opts.OEM == "" {
		opts.OEM = OEMBtrfs
	}
	if err := opts.validate(); err != nil {
		return err
	}
	parts, err := plan(opts)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(path), ".flatcardisk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// Each filesystem is made in a file of its own, in parallel, then copied into its range.
	type fsJob struct {
		part part
		file string
		make func(file string) error
	}
	var jobs []fsJob
	for _, p := range parts {
		file := filepath.Join(work, p.Name+".fs")
		switch p.Name {
		case "EFI-SYSTEM":
			jobs = append(jobs, fsJob{p, file, func(f string) error { return makeESP(work, f, p.Size, opts) }})
		case "OEM":
			jobs = append(jobs, fsJob{p, file, func(f string) error { return makeOEM(work, f, p.Size, opts) }})
		case "ROOT":
			jobs = append(jobs, fsJob{p, file, func(f string) error {
				if err := sparseFile(f, p.Size); err != nil {
					return err
				}
				args := []string{"-q", "-F", "-L", "ROOT"}
				if opts.RootTree != "" {
					args = append(args, "-d", opts.RootTree)
				}
				return run("mkfs.ext4", append(args, f)...)
			}})
		case "USR-A":
			if opts.USRAImage != "" {
				jobs = append(jobs, fsJob{p, opts.USRAImage, func(f string) error {
					st, err := os.Stat(f)
					if err != nil {
						return err
					}
					if st.Size() > p.Size {
						return fmt.Errorf("%s (%d bytes) does not fit USR-A (%d bytes)", f, st.Size(), p.Size)
					}
					return nil
				}})
			}
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			if err := j.make(j.file); err != nil {
				errs[i] = fmt.Errorf("making the %s filesystem: %w", j.part.Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	tmp := filepath.Join(work, "disk.img")
	if err := sparseFile(tmp, opts.diskSize()); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, j := range jobs {
		if err := copyInto(f, j.part.Start, j.file, 0, j.part.Size); err != nil {
			return fmt.Errorf("copying the %s filesystem into the disk: %w", j.part.Name, err)
		}
	}
	if err := writeGPT(f, opts.diskSize(), parts); err != nil {
		return err
	}
	esp, _ := findPart(parts, "EFI-SYSTEM")
	if err := writeMBR(f, opts.diskSize(), esp, opts.HybridMBR); err != nil {
		return err
	}
	if opts.Bootable {
		biosBoot, _ := findPart(parts, "BIOS-BOOT")
		if err := installBIOSGrub(work, f, biosBoot); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// makeESP makes the FAT32 EFI-SYSTEM filesystem: Flatcar's main GRUB config, the first-boot flag
// if asked, and the boot files for a bootable disk.
func makeESP(work, fsPath string, size int64, opts Options) error {
	tree := filepath.Join(work, "esp-tree")
	files := map[string][]byte{"flatcar/grub/grub.cfg": []byte(MainGrubCfg())}
	if opts.FirstBoot {
		files["flatcar/first_boot"] = nil
	}
	if err := writeTree(tree, files); err != nil {
		return err
	}
	if opts.Bootable {
		if err := bootFiles(work, tree, opts); err != nil {
			return err
		}
	}
	if err := sparseFile(fsPath, size); err != nil {
		return err
	}
	if err := run("mkfs.vfat", "-F", "32", "-s", "1", "-n", "EFI-SYSTEM", "-i", "4C4F4F46", fsPath); err != nil {
		return err
	}
	entries, err := filepath.Glob(filepath.Join(tree, "*"))
	if err != nil {
		return err
	}
	// MTOOLS_SKIP_CHECK: mtools would refuse a FAT32 image with fewer clusters than it expects.
	return runEnv([]string{"MTOOLS_SKIP_CHECK=1"}, "mcopy", append(append([]string{"-s", "-i", fsPath}, entries...), "::/")...)
}

// OEMPartition returns the byte range of the partition named OEM, read from the image's GPT.
func OEMPartition(path string) (start, size int64, err error) { return PartitionRange(path, "OEM") }

// PartitionRange returns the byte range of the partition called name, read from the image's GPT.
func PartitionRange(path, name string) (start, size int64, err error) {
	img, err := disk.Open(path, false)
	if err != nil {
		return 0, 0, err
	}
	defer img.Close()
	p, err := img.FindPartition(name)
	if err != nil {
		return 0, 0, err
	}
	return p.Start, p.Size, nil
}

// Partitions returns the partitions in the image's GPT; an unreadable table fails the test.
func Partitions(t testing.TB, path string) []disk.Partition {
	t.Helper()
	img, err := disk.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	parts, err := img.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// ExtractPartition copies the partition called name into a sparse file of its own in
// t.TempDir(), for the tools that take a whole device (fsck, debugfs, resize2fs).
func ExtractPartition(t testing.TB, img, name string) string {
	t.Helper()
	start, size, err := PartitionRange(img, name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), strings.ToLower(name)+".fs")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	out.Truncate(size)
	if err := copyInto(out, 0, img, start, size); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	cacheMu  sync.Mutex
	cache    = map[string]string{} // Options.key() -> built image
	cacheDir string
)

// Build returns a fresh (sparse) copy in t.TempDir() of the disk described by opts, which the
// test may modify. Identical options are built once per test process. Missing tools, and missing
// root for OEM btrfs-kernel-zlib, skip the test through testutil (a failure in strict mode).
func Build(t testing.TB, opts Options) string {
	t.Helper()
	testutil.RequireTools(t, opts.tools()...)
	src, err := cached(opts)
	if errors.Is(err, errNeedsRoot) {
		testutil.RequireRoot(t, fmt.Sprintf("the OEM %s fixture (%v)", opts.OEM, err))
	}
	if err != nil {
		t.Fatalf("flatcardisk: building a Flatcar-layout disk: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "flatcar.img")
	if err := CopySparse(src, dst); err != nil {
		t.Fatalf("flatcardisk: %v", err)
	}
	return dst
}

func cached(opts Options) (string, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	k := opts.key()
	if p, ok := cache[k]; ok {
		return p, nil
	}
	if cacheDir == "" {
		dir, err := testutil.ProcessDir("flatcardisk-cache-")
		if err != nil {
			return "", err
		}
		cacheDir = dir
	}
	p := filepath.Join(cacheDir, fmt.Sprintf("disk-%d.img", len(cache)))
	if err := BuildTo(p, opts); err != nil {
		return "", err
	}
	cache[k] = p
	return p, nil
}
