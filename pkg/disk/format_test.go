package disk_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// One detector for every command: qcow2 and raw are opened, everything we recognise but cannot
// use is refused with its kind and the command that fixes it.
func TestDetectFormat(t *testing.T) {
	iso := make([]byte, 0x9000)
	copy(iso[0x8001:], "CD001")
	vhdFixed := make([]byte, 4096)
	copy(vhdFixed[len(vhdFixed)-512:], "conectix")
	mbr := make([]byte, 4096)
	mbr[0], mbr[1], mbr[510], mbr[511] = 0xeb, 0x63, 0x55, 0xaa
	cases := []struct {
		name   string
		data   []byte
		format disk.Format
		kind   string
		fix    string
	}{
		{"qcow2", []byte("QFI\xfb\x00\x00\x00\x03"), disk.FormatQcow2, "", ""},
		{"raw with MBR", mbr, disk.FormatRaw, "", ""},
		{"all zero", make([]byte, 1<<16), disk.FormatRaw, "", ""},
		{"empty", nil, disk.FormatRaw, "", ""},
		{"bzip2", []byte("BZh91AY&SY"), "", "bzip2", "lbzip2 -dk"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0}, "", "gzip", "gunzip"},
		{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 0}, "", "xz", "unxz"},
		{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0}, "", "zstd", "unzstd"},
		{"vmdk sparse", []byte("KDMV\x01\x00\x00\x00"), "", "VMDK", "qemu-img convert"},
		{"vmdk descriptor", []byte("# Disk DescriptorFile\nversion=1\n"), "", "VMDK", "qemu-img convert"},
		{"vhdx", []byte("vhdxfile"), "", "VHDX", "qemu-img convert"},
		{"vhd dynamic", []byte("conectix"), "", "VHD", "qemu-img convert"},
		{"vhd fixed (footer only)", vhdFixed, "", "VHD", "qemu-img convert"},
		{"iso", iso, "", "ISO 9660", "not a Flatcar disk"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := disk.DetectFileFormat(path)
			if c.kind == "" {
				if err != nil || got != c.format {
					t.Fatalf("got %q, %v; want %q", got, err, c.format)
				}
				return
			}
			var ue *disk.UnsupportedFormatError
			if !errors.As(err, &ue) || ue.Kind != c.kind || !errors.Is(err, disk.ErrNotDiskImage) {
				t.Fatalf("got %q, %v; want an UnsupportedFormatError of kind %s", got, err, c.kind)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, c.fix) || strings.Contains(msg, "FILE") {
				t.Fatalf("message %q should name %s and the fix %q", msg, path, c.fix)
			}
			// disk.Open, which every image command uses, refuses it the same way.
			if img, err := disk.Open(path, false); err == nil || !errors.As(err, &ue) {
				if img != nil {
					img.Close()
				}
				t.Fatalf("disk.Open accepted a %s file: %v", c.kind, err)
			}
		})
	}
}

// Whatever the bytes, detection answers qcow2, raw or an UnsupportedFormatError, and agrees
// with the magic it found; it never panics.
func FuzzDetectFormat(f *testing.F) {
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03"))
	f.Add([]byte("BZh91AY&SY"))
	f.Add([]byte("conectix"))
	f.Add(make([]byte, 512))
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := disk.DetectFormat(bytes.NewReader(data))
		var ue *disk.UnsupportedFormatError
		switch {
		case err != nil:
			if !errors.As(err, &ue) || ue.Kind == "" || ue.Fix == "" {
				t.Fatalf("unexpected error: %v", err)
			}
			if bytes.HasPrefix(data, []byte("QFI\xfb")) {
				t.Fatalf("a qcow2 magic refused as %s", ue.Kind)
			}
		case format == disk.FormatQcow2:
			if !bytes.HasPrefix(data, []byte("QFI\xfb")) {
				t.Fatal("qcow2 without its magic")
			}
		case format == disk.FormatRaw:
			if bytes.HasPrefix(data, []byte("BZh")) || bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
				t.Fatal("a compressed stream taken as raw")
			}
		default:
			t.Fatalf("unknown format %q", format)
		}
	})
}
