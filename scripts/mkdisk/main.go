// Command mkdisk builds a Flatcar-layout test disk (internal/testing/flatcardisk) for the demo and the
// benchmarks: go run ./scripts/mkdisk -variant btrfs -o FILE
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

func main() {
	var (
		opts    flatcardisk.Options
		variant = flag.String("variant", "btrfs", "OEM partition: btrfs, btrfs-dup, btrfs-kernel-zlib (root), ext4, none")
		out     = flag.String("o", "", "output raw image (required)")
		oemSize = flag.Int64("oem-size-mib", 0, "OEM partition size in MiB (default 128)")
		size    = flag.Int64("size-mib", 0, "disk size in MiB (default 600)")
		extra   = flag.String("extra-oem-file", "", "NAME=CONTENT added to the OEM partition, e.g. config.ign={}")
	)
	flag.BoolVar(&opts.Bootable, "bootable", false, "install GRUB (BIOS and UEFI), the Debian kernel and a busybox initramfs")
	flag.BoolVar(&opts.FirstBoot, "first-boot", false, "put /flatcar/first_boot on the ESP")
	flag.BoolVar(&opts.HybridMBR, "hybrid-mbr", false, "write a hybrid MBR like Flatcar before stable 4459.2.0")
	flag.BoolVar(&opts.NoGrubCfg, "no-grub-cfg", false, "leave grub.cfg out of the OEM partition")
	flag.StringVar(&opts.GrubCfg, "grub-cfg", "", "OEM grub.cfg content (default: Flatcar's qemu one)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: mkdisk [-variant KIND] [-bootable] [-first-boot] [-hybrid-mbr] -o FILE")
		os.Exit(2)
	}
	opts.OEM = flatcardisk.OEMKind(*variant)
	opts.OEMSize = *oemSize << 20
	opts.DiskSize = *size << 20
	if *extra != "" {
		name, content, ok := strings.Cut(*extra, "=")
		if !ok {
			fmt.Fprintln(os.Stderr, "mkdisk: -extra-oem-file wants NAME=CONTENT")
			os.Exit(2)
		}
		opts.ExtraOEMFiles = map[string][]byte{name: []byte(content)}
	}
	start := time.Now()
	if err := flatcardisk.BuildTo(*out, opts); err != nil {
		fmt.Fprintf(os.Stderr, "mkdisk: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "mkdisk: built %s (%s OEM) in %.2fs\n", *out, opts.OEM, time.Since(start).Seconds())
}
