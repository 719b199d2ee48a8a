package flatcardisk

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// OEMID and Version are what the default OEM partition says it is: a qemu image of this release.
const (
	oemid   = "qemu"
	Version = "4459.2.0"
)

// DefaultGrubCfg is the OEM grub.cfg of Flatcar's qemu image.
func DefaultGrubCfg() string {
	return "# Flatcar GRUB settings\n\nset oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n"
}

// longGrubCfg has the same settings after a long comment, so that btrfs stores it as a
// zlib-compressed inline extent when the kernel writes it with compress=zlib (the default grub.cfg
// of OEM btrfs-kernel-zlib).
func longGrubCfg() string {
	var b strings.Builder
	b.WriteString("# Flatcar GRUB settings\n#\n")
	for i := 1; i <= 24; i++ {
		fmt.Fprintf(&b, "# Line %02d of a long comment: GRUB sources this file from the OEM partition.\n", i)
	}
	b.WriteString("\nset oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n")
	return b.String()
}

// OEMFiles is exactly what the OEM filesystem of a disk built with opts contains, by path
// relative to its root, so tests can compare byte for byte.
func OEMFiles(opts Options) map[string][]byte {
	id := opts.OEMID
	if id == "" {
		id = oemid
	}
	release := fmt.Sprintf("ID=%s\nVERSION_ID=%s\nNAME=\"QEMU\"\nHOME_URL=\"https://www.qemu.org/\"\nBUG_REPORT_URL=\"https://issues.flatcar.org\"\n", id, Version)
	if id == "openstack" {
		release = fmt.Sprintf("ID=%s\nVERSION_ID=%s\nNAME=\"Openstack\"\nHOME_URL=\"https://www.openstack.org/\"\nBUG_REPORT_URL=\"https://issues.flatcar.org\"\n", id, Version)
	}
	files := map[string][]byte{
		"oem-release": []byte(release),
		"sysext/oem-" + id + "-" + Version + ".raw": sysextImage(),
		"sysext/active-oem-" + id:                   []byte(Version + "\n"),
	}
	if !opts.NoGrubCfg {
		switch {
		case opts.GrubCfg != "":
			files["grub.cfg"] = []byte(opts.GrubCfg)
		case opts.OEM == OEMBtrfsKernelZlib:
			files["grub.cfg"] = []byte(longGrubCfg())
		default:
			files["grub.cfg"] = []byte(DefaultGrubCfg())
		}
	}
	for name, data := range opts.ExtraOEMFiles {
		files[name] = data
	}
	return files
}

// sysextImage stands in for the OEM sysext: 64 KiB of incompressible bytes, so it is stored in
// regular (not inline) extents, as the real multi-MiB image is.
func sysextImage() []byte {
	b := make([]byte, 64<<10)
	rand.New(rand.NewSource(4459)).Read(b)
	return b
}

// writeTree writes files under dir (0644 files, 0755 directories), in a stable order.
func writeTree(dir string, files map[string][]byte) error {
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		clean := filepath.Clean(n)
		if filepath.IsAbs(clean) || clean == "." || strings.HasPrefix(clean, "..") {
			return fmt.Errorf("OEM file name %q must be a relative path inside the partition", n)
		}
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// makeOEM makes the OEM filesystem image file fsPath of size bytes with opts' contents.
func makeOEM(work, fsPath string, size int64, opts Options) error {
	tree := filepath.Join(work, "oem-tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return err
	}
	if err := writeTree(tree, OEMFiles(opts)); err != nil {
		return err
	}
	if err := sparseFile(fsPath, size); err != nil {
		return err
	}
	switch opts.OEM {
	case OEMBtrfs, "":
		// As Flatcar's build_library makes it.
		return run("mkfs.btrfs", "-q", "--mixed", "-m", "single", "-d", "single", "-L", "OEM", "--rootdir", tree, fsPath)
	case OEMBtrfsDup:
		// DUP metadata: two copies of every tree block, so of every inline grub.cfg too. Not --mixed:
		// btrfs-progs 6.2 cannot allocate a mixed DUP chunk ("not enough free space").
		return run("mkfs.btrfs", "-q", "-m", "dup", "-d", "single", "-L", "OEM", "--rootdir", tree, fsPath)
	case OEMExt4:
		return run("mkfs.ext4", "-q", "-F", "-L", "OEM", "-d", tree, fsPath)
	case OEMBtrfsKernelZlib:
		return makeKernelZlibOEM(work, tree, fsPath)
	}
	return fmt.Errorf("unknown OEM kind %q", opts.OEM)
}

// errNeedsRoot is returned for fixtures that need a kernel mount (OEM btrfs-kernel-zlib).
var errNeedsRoot = errors.New("this fixture needs root: the kernel writes its files through a loop mount")

// makeKernelZlibOEM lets the kernel write the files through a loop mount with compress=zlib, as
// Flatcar's image build does, so small compressible files become zlib-compressed inline extents.
func makeKernelZlibOEM(work, tree, fsPath string) error {
	if os.Geteuid() != 0 {
		return errNeedsRoot
	}
	if err := run("mkfs.btrfs", "-q", "--mixed", "-m", "single", "-d", "single", "-L", "OEM", fsPath); err != nil {
		return err
	}
	mnt := filepath.Join(work, "oem-mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := run("mount", "-o", "loop,compress=zlib", fsPath, mnt); err != nil {
		return err
	}
	copyErr := run("cp", "-a", tree+"/.", mnt+"/")
	if err := run("umount", mnt); err != nil {
		return err
	}
	return copyErr
}

func run(name string, args ...string) error { return runEnv(nil, name, args...) }

// runEnv runs a tool with extra environment variables and reports its output when it fails.
func runEnv(env []string, name string, args ...string) error {
	if out, err := testutil.RunTool(env, name, args...); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
