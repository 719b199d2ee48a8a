package flatcardisk

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// CmdlineMarker starts the line the test initramfs prints on ttyS0: the marker, then /proc/cmdline.
const CmdlineMarker = "FLATCAR_CAPO_CMDLINE: "

// MainGrubCfg is the GRUB config on the ESP (/flatcar/grub/grub.cfg). It mimics Flatcar's main
// config: defaults, then the OEM partition's grub.cfg is sourced and may override them, then the
// kernel command line is built from the variables.
func MainGrubCfg() string {
	return `# Main GRUB config of the flatcar-capo test disk; it mimics Flatcar's.
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set default="flatcar"
set timeout=0

set linux_root="root=LABEL=ROOT"
set linux_console=""
set linux_append=""
set oem_id=""
set first_boot=""

# Flatcar searches the GPT name (--part-label OEM, a Flatcar patch that Debian's GRUB lacks);
# the filesystem label is OEM too.
search --no-floppy --set oem --label OEM
if [ -n "$oem" -a -f "($oem)/grub.cfg" ]; then
    source "($oem)/grub.cfg"
fi

if [ -z "$linux_console" ]; then
    set linux_console="console=ttyS0,115200n8"
fi

if [ -f "($root)/flatcar/first_boot" ]; then
    set first_boot="flatcar.first_boot=detected"
fi

# no_timer_check (not in Flatcar's): under QEMU TCG on a busy host the kernel's IO-APIC timer
# check can fail and panic ("IO-APIC + timer doesn't work").
menuentry "Flatcar default" --id=flatcar {
    linux /flatcar/vmlinuz-a panic=-1 mount.usrflags=ro consoleblank=0 no_timer_check $linux_root $linux_console $first_boot flatcar.oem.id=$oem_id $linux_append
    initrd /flatcar/initrd-a
}
`
}

// embeddedGrubCfg is built into core.img / BOOTX64.EFI: find the ESP by its label and load the
// main config from it (as Flatcar's load.cfg does by UUID).
const embeddedGrubCfg = `search --no-floppy --label EFI-SYSTEM --set root
set prefix=($root)/flatcar/grub
`

var grubModules = []string{"part_gpt", "part_msdos", "fat", "btrfs", "ext2", "search", "search_label",
	"search_fs_uuid", "normal", "linux", "echo", "test", "configfile", "serial", "terminal", "gzio"}

// KernelPath finds the Debian kernel (linux-image-amd64) in /boot: the newest one.
func KernelPath() (string, error) {
	m, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(m) == 0 {
		return "", fmt.Errorf("no kernel in /boot (install linux-image-amd64; scripts/install-deps.sh does)")
	}
	sort.Strings(m)
	return m[len(m)-1], nil
}

// bootFiles adds the kernel, initramfs and (for UEFI) GRUB's EFI binary to the ESP tree.
func bootFiles(work, espTree string, opts Options) error {
	kernel := opts.Kernel
	if kernel == "" {
		k, err := KernelPath()
		if err != nil {
			return err
		}
		kernel = k
	}
	dir := filepath.Join(espTree, "flatcar")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := run("cp", kernel, filepath.Join(dir, "vmlinuz-a")); err != nil {
		return err
	}
	initrd := opts.Initramfs
	if initrd == nil {
		var err error
		if initrd, err = initramfs(); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "initrd-a"), initrd, 0o644); err != nil {
		return err
	}
	cfg := filepath.Join(work, "embedded.cfg")
	if err := os.WriteFile(cfg, []byte(embeddedGrubCfg), 0o644); err != nil {
		return err
	}
	efiDir := filepath.Join(espTree, "EFI", "boot")
	if err := os.MkdirAll(efiDir, 0o755); err != nil {
		return err
	}
	args := []string{"-O", "x86_64-efi", "-p", "/flatcar/grub", "-c", cfg, "-o", filepath.Join(efiDir, "bootx64.efi")}
	return run("grub-mkimage", append(append(args, grubModules...), "efi_gop")...)
}

// installBIOSGrub does what grub-bios-setup does for a GPT disk: core.img goes into the BIOS-BOOT
// partition with its blocklist pointing at itself, boot.img's code goes into the MBR (entries and
// signature untouched) pointing at core.img.
func installBIOSGrub(work string, disk *os.File, biosBoot part) error {
	core := filepath.Join(work, "core.img")
	cfg := filepath.Join(work, "embedded.cfg")
	args := []string{"-O", "i386-pc", "-p", "/flatcar/grub", "-c", cfg, "-o", core, "biosdisk"}
	if err := run("grub-mkimage", append(args, grubModules...)...); err != nil {
		return err
	}
	img, err := os.ReadFile(core)
	if err != nil {
		return err
	}
	if int64(len(img)) > biosBoot.Size {
		return fmt.Errorf("core.img (%d bytes) does not fit BIOS-BOOT (%d bytes)", len(img), biosBoot.Size)
	}
	lba := uint64(biosBoot.Start / sector)
	// diskboot.img's blocklist (last 12 bytes of the first sector: start, length, segment): the rest
	// of core.img follows the first sector; grub-mkimage has already set length and segment.
	binary.LittleEndian.PutUint64(img[sector-12:], lba+1)
	if _, err := disk.WriteAt(img, biosBoot.Start); err != nil {
		return err
	}
	boot, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil {
		return fmt.Errorf("reading GRUB's boot.img (install grub-pc-bin): %w", err)
	}
	binary.LittleEndian.PutUint64(boot[0x5c:], lba) // kernel_sector: where core.img starts
	boot[0x66], boot[0x67] = 0x90, 0x90             // hard disk: skip the boot drive check, as grub-bios-setup does
	_, err = disk.WriteAt(boot[:440], 0)
	return err
}

// initramfs is a gzip'ed newc cpio: busybox-static and an /init that prints the kernel command
// line after CmdlineMarker on ttyS0 (whatever console= says) and powers off.
func initramfs() ([]byte, error) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("reading /bin/busybox (install busybox-static): %w", err)
	}
	init := "#!/bin/busybox sh\n" +
		"/bin/busybox mount -t proc proc /proc\n" +
		"echo \"" + CmdlineMarker + "$(/bin/busybox cat /proc/cmdline)\" > /dev/ttyS0\n" +
		// poweroff -f does not drain the tty: on a busy TCG host the marker line was lost.
		"/bin/busybox sleep 2\n" +
		"/bin/busybox poweroff -f\n"
	var c CPIO
	c.Add("bin", 0o040755, 0, 0, nil)
	c.Add("dev", 0o040755, 0, 0, nil)
	c.Add("proc", 0o040755, 0, 0, nil)
	c.Add("dev/console", 0o020600, 5, 1, nil)
	c.Add("dev/ttyS0", 0o020660, 4, 64, nil)
	c.Add("bin/busybox", 0o100755, 0, 0, busybox)
	c.Add("init", 0o100755, 0, 0, []byte(init))
	return c.Gzip()
}

// CPIO builds a gzip'ed "newc" archive, the format the kernel unpacks, for an initramfs
// (Options.Initramfs).
type CPIO struct {
	buf bytes.Buffer
	ino int
}

// Add appends an entry: mode includes the file type bits (0o100000 file, 0o040000 directory,
// 0o120000 symlink with data = target, 0o020000 character device with rdev).
func (c *CPIO) Add(name string, mode uint32, rdevMajor, rdevMinor int, data []byte) {
	c.ino++
	nlink := 1
	if mode&0o040000 != 0 {
		nlink = 2
	}
	fmt.Fprintf(&c.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.buf.WriteString(name)
	c.buf.WriteByte(0)
	c.pad()
	c.buf.Write(data)
	c.pad()
}

func (c *CPIO) pad() {
	for c.buf.Len()%4 != 0 {
		c.buf.WriteByte(0)
	}
}

// Gzip ends the archive and returns it compressed.
func (c *CPIO) Gzip() ([]byte, error) {
	c.Add("TRAILER!!!", 0, 0, 0, nil)
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	if _, err := zw.Write(c.buf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
