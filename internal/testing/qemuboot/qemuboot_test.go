package qemuboot

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// One boot takes 10-20 s under TCG (sequential: on 2 cores parallel TCG guests only slow each
// other down): this table is the whole boot coverage of the fixtures.
func TestBootPrintsGRUBsCommandLine(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat", "mcopy", "grub-mkimage")
	tests := []struct {
		name      string
		disk      flatcardisk.Options
		boot      Options
		protect   bool // replace the hybrid MBR with a protective one before booting
		want      []string
		forbidden []string
	}{
		{
			name:      "btrfs OEM, BIOS",
			disk:      flatcardisk.Options{OEM: flatcardisk.OEMBtrfs, Bootable: true},
			want:      []string{"flatcar.oem.id=qemu", "flatcar.autologin", "console=ttyS0,115200n8", "root=LABEL=ROOT"},
			forbidden: []string{"flatcar.first_boot"},
		},
		{
			name:    "ext4 OEM, hybrid MBR made protective, BIOS",
			disk:    flatcardisk.Options{OEM: flatcardisk.OEMExt4, Bootable: true, HybridMBR: true},
			protect: true,
			want:    []string{"flatcar.oem.id=qemu", "flatcar.autologin"},
		},
		{
			name:      "OEM without grub.cfg, first boot, UEFI",
			disk:      flatcardisk.Options{NoGrubCfg: true, FirstBoot: true, Bootable: true},
			boot:      Options{UEFI: true},
			want:      []string{"flatcar.oem.id=", "flatcar.first_boot=detected"},
			forbidden: []string{"flatcar.oem.id=qemu", "flatcar.autologin"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := flatcardisk.Build(t, tc.disk)
			if tc.protect {
				d, err := disk.Open(img, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := disk.WriteProtectiveMBR(d); err != nil {
					t.Fatal(err)
				}
				d.Close()
			}
			cmdline := Boot(t, img, tc.boot)
			fields := " " + cmdline + " "
			for _, w := range tc.want {
				if !strings.Contains(fields, " "+w+" ") {
					t.Errorf("command line lacks %q: %s", w, cmdline)
				}
			}
			for _, f := range tc.forbidden {
				if strings.Contains(cmdline, f) {
					t.Errorf("command line has %q: %s", f, cmdline)
				}
			}
		})
	}
}

func TestBootFailsClearlyOnAnUnbootableDisk(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat", "mcopy")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	_, _, err := run(t.Context(), img, t.TempDir(), Options{Timeout: 5e9})
	if err == nil || !strings.Contains(err.Error(), "did not power off within 5s") {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestParseFindsTheMarkerLine(t *testing.T) {
	log := []byte("[ 1.0] Run /init\r\n" + flatcardisk.CmdlineMarker + "a=b c\r\n[ 1.1] reboot: Power down\r\n")
	if got, ok := parse(log); !ok || got != "a=b c" {
		t.Errorf("parse = %q, %t", got, ok)
	}
	if _, ok := parse([]byte("no marker\n")); ok {
		t.Error("parse found a marker in a log without one")
	}
}
