package glance_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

func TestBuildMetadata(t *testing.T) {
	m, err := glance.BuildMetadata(glance.MetadataInput{
		KubernetesVersion: "1.33.1",
		Properties:        []string{"os_distro=flatcar-custom", "hw_rng_model=virtio", "note=a=b"},
		Tags:              []string{"extra", "flatcar-capo"},
		Record:            record.Record{FlatcarVersion: "4459.2.0", KubernetesVersion: "v1.30.0", Arch: "arm64"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"os_distro": "flatcar-custom", "os_type": "linux", "hw_qemu_guest_agent": "yes",
		"architecture": "aarch64", "os_version": "4459.2.0", "kubernetes_version": "v1.33.1", "hw_rng_model": "virtio", "note": "a=b",
		"hw_firmware_type": "uefi"} // arm64 boots only with UEFI
	for k, v := range want {
		if m.Properties[k] != v {
			t.Errorf("%s = %q, want %q", k, m.Properties[k], v)
		}
	}
	if len(m.Properties) != len(want) {
		t.Errorf("properties %v, want %v", m.Properties, want)
	}
	if !slices.Equal(m.Tags, []string{"extra", "flatcar-capo", "kube-v1.33.1"}) {
		t.Errorf("tags %v", m.Tags)
	}
	for _, bad := range [][]string{{"novalue"}, {"=x"}, {"id=1"}, {"os_glance_x=1"}, {"a b=1"}, {"k=" + strings.Repeat("v", 256)}, {strings.Repeat("k", 256) + "=1"}} {
		if _, err := glance.BuildMetadata(glance.MetadataInput{Properties: bad}); err == nil {
			t.Errorf("property %q accepted", bad[0])
		}
	}
	if _, err := glance.BuildMetadata(glance.MetadataInput{Tags: []string{"a/b"}}); err == nil {
		t.Error("tag a/b accepted")
	}
	if _, err := glance.BuildMetadata(glance.MetadataInput{Record: record.Record{Arch: "riscv"}}); err == nil {
		t.Error("unknown architecture accepted")
	}
}

func TestDetectFileFormat(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, size int64) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			os.Truncate(p, size)
		}
		return p
	}
	qhdr := make([]byte, 104)
	copy(qhdr, "QFI\xfb")
	binary.BigEndian.PutUint32(qhdr[4:], 3)
	backing := slices.Clone(qhdr)
	binary.BigEndian.PutUint64(backing[8:], 512)
	cases := []struct {
		name   string
		path   string
		format disk.Format
		why    string
	}{
		{"qcow2 named .raw", write("a.raw", qhdr, 0), disk.FormatQcow2, ""},
		{"raw named .qcow2", write("b.qcow2", []byte{0xeb, 0x63}, 1<<20), disk.FormatRaw, ""},
		{"qcow2 with backing file", write("c.img", backing, 0), "", "backing file"},
		{"bzip2", write("d.img", []byte("BZh91AY&SY"), 4096), "", "bzip2"},
		{"gzip", write("e.img", []byte{0x1f, 0x8b, 8}, 4096), "", "gzip"},
		{"vmdk", write("f.img", []byte("KDMV"), 4096), "", "VMDK"},
		{"text", write("g.txt", []byte("hello\n"), 0), "", "512-byte sectors"},
		{"empty", write("h.img", nil, 0), "", "512-byte sectors"},
		{"directory", dir, "", "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, _, err := glance.DetectFileFormat(c.path)
			if c.why == "" {
				if err != nil || f != c.format {
					t.Fatalf("got %q, %v; want %q", f, err, c.format)
				}
				return
			}
			if !errors.Is(err, glance.ErrNotDiskImage) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v; want ErrNotDiskImage mentioning %q", err, c.why)
			}
		})
	}
}

// Whatever the file holds, format detection answers qcow2, raw or ErrNotDiskImage; never panics.
func FuzzDetectFileFormat(f *testing.F) {
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03"))
	f.Add([]byte("BZh91AY&SY"))
	f.Add(make([]byte, 512))
	path := filepath.Join(f.TempDir(), "img")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		format, size, err := glance.DetectFileFormat(path)
		if err != nil && !errors.Is(err, glance.ErrNotDiskImage) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if err == nil && (size != int64(len(data)) || (format != disk.FormatRaw && format != disk.FormatQcow2)) {
			t.Fatalf("format %q size %d for %d bytes", format, size, len(data))
		}
	})
}

// min_disk is whole GiB rounded up; UEFI-only images (arm64, qemu_uefi) get hw_firmware_type.
func TestMetadataMinDiskAndFirmware(t *testing.T) {
	for size, want := range map[int64]int{600 << 20: 1, 1 << 30: 1, 1<<30 + 512: 2, 8<<30 + 1: 9} {
		if got := glance.MinDiskGiB(size); got != want {
			t.Errorf("MinDiskGiB(%d) = %d, want %d", size, got, want)
		}
	}
	uefi := record.Record{Arch: "amd64", Inputs: record.Inputs{Base: "qemu_uefi"}}
	for _, tc := range []struct {
		rec  record.Record
		want bool
	}{{record.Record{Arch: "amd64"}, false}, {record.Record{Arch: "arm64"}, true}, {uefi, true}} {
		m, err := glance.BuildMetadata(glance.MetadataInput{Record: tc.rec, VirtualSize: 9 << 30})
		if err != nil {
			t.Fatal(err)
		}
		if (m.Properties["hw_firmware_type"] == "uefi") != tc.want || m.MinDiskGiB != 9 || m.MinRAMMiB != glance.DefaultMinRAMMiB || m.Properties["os_distro"] != "flatcar" {
			t.Errorf("%+v: %+v", tc.rec, m)
		}
	}
	if _, err := glance.BuildMetadata(glance.MetadataInput{Record: record.Record{Arch: "amd64"}, VirtualSize: 9 << 30, MinDiskGiB: 8}); err == nil {
		t.Error("--min-disk below the virtual size accepted")
	}
}
