package oem_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/qemuboot"
)

// The proof that matters: real GRUB boots the patched image and the kernel command line carries
// flatcar.oem.id=openstack (and no autologin); an unpatched image shows flatcar.oem.id=qemu.
func TestBootPatchedImages(t *testing.T) {
	testutil.SkipLong(t, "boot tests take ~15 s each under QEMU TCG")
	testutil.RequireTools(t, "qemu-system-x86_64", "grub-mkimage", "mkfs.btrfs")
	for _, kind := range []flatcardisk.OEMKind{flatcardisk.OEMBtrfs, flatcardisk.OEMExt4} {
		t.Run(string(kind), func(t *testing.T) {
			img := flatcardisk.Build(t, flatcardisk.Options{OEM: kind, Bootable: true, FirstBoot: true})
			testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
			cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
			if !hasArg(cmdline, "flatcar.oem.id=openstack") || hasArg(cmdline, "flatcar.autologin") {
				t.Fatalf("guest /proc/cmdline after oem set: %q", cmdline)
			}
		})
	}
	t.Run("btrfs UEFI", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, FirstBoot: true})
		testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{UEFI: true})
		if !hasArg(cmdline, "flatcar.oem.id=openstack") || hasArg(cmdline, "flatcar.autologin") {
			t.Fatalf("guest /proc/cmdline after oem set, UEFI: %q", cmdline)
		}
	})
	t.Run("unpatched", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, FirstBoot: true})
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
		if !hasArg(cmdline, "flatcar.oem.id=qemu") || !hasArg(cmdline, "flatcar.autologin") {
			t.Fatalf("unpatched guest /proc/cmdline: %q", cmdline)
		}
	})
	t.Run("hybrid MBR replaced by protective", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, HybridMBR: true, FirstBoot: true})
		testutil.Run(t, "oem", "set", img, "--id", "openstack", "--protective-mbr", "--linux-append", "flatcar.capo.test=1").MustSucceed(t)
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
		if !hasArg(cmdline, "flatcar.oem.id=openstack") || !hasArg(cmdline, "flatcar.capo.test=1") {
			t.Fatalf("guest /proc/cmdline after --protective-mbr: %q", cmdline)
		}
	})
}

func hasArg(cmdline, arg string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == arg {
			return true
		}
	}
	return false
}
