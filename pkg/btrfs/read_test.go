package btrfs

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

func TestReadFS(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			want := qemuOEM(v.grub)
			img := mkImage(t, v, want)
			fs, _ := openImage(t, img)
			if got := fs.Label(); got != "OEM" {
				t.Errorf("Label() = %q, want OEM", got)
			}
			sameFiles(t, "ReadFile", readAllFS(t, fs, want), want)

			root, err := fs.list("/")
			if err != nil {
				t.Fatal(err)
			}
			wantRoot := map[string]DirEntry{
				"oem-release": {"oem-release", false, int64(len(qemuOEMRelease))},
				"sysext":      {"sysext", true, 0},
			}
			if v.grub {
				wantRoot["grub.cfg"] = DirEntry{"grub.cfg", false, int64(len(qemuGrub))}
			}
			if got := byName(root); !reflect.DeepEqual(got, wantRoot) {
				t.Errorf("ReadDir(/) = %v, want %v", got, wantRoot)
			}
			sys, err := fs.list("sysext/")
			if err != nil {
				t.Fatal(err)
			}
			wantSys := map[string]DirEntry{
				"oem-qemu-4459.2.1.raw": {"oem-qemu-4459.2.1.raw", false, 12 << 10},
				"active-oem-qemu":       {"active-oem-qemu", false, 0},
			}
			if got := byName(sys); !reflect.DeepEqual(got, wantSys) {
				t.Errorf("ReadDir(/sysext) = %v, want %v", got, wantSys)
			}

			for _, c := range []struct {
				path string
				want DirEntry
			}{
				{"/", DirEntry{"/", true, 0}},
				{"/sysext", DirEntry{"sysext", true, 0}},
				{sysextPath, DirEntry{"oem-qemu-4459.2.1.raw", false, 12 << 10}},
				{"/oem-release", DirEntry{"oem-release", false, int64(len(qemuOEMRelease))}},
			} {
				if got, err := fs.entry(c.path); err != nil || got != c.want {
					t.Errorf("Stat(%s) = %v, %v; want %v", c.path, got, err, c.want)
				}
			}
		})
	}
}

func TestReadMissing(t *testing.T) {
	fs, _ := openImage(t, mkImage(t, mixedNoGrub, qemuOEM(false)))
	for _, p := range []string{"/grub.cfg", "/sysext/nope", "/nodir/x"} {
		if _, err := fs.read(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadFile(%s) error = %v, want os.ErrNotExist", p, err)
		}
		if _, err := fs.entry(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Stat(%s) error = %v, want os.ErrNotExist", p, err)
		}
	}
	if _, err := fs.read("/oem-release/x"); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile through a file: %v, want a not-a-directory error", err)
	}
	if _, err := fs.read("/sysext"); err == nil {
		t.Error("ReadFile of a directory succeeded")
	}
	if _, err := fs.list("/oem-release"); err == nil {
		t.Error("ReadDir of a file succeeded")
	}
}

func byName(es []DirEntry) map[string]DirEntry {
	m := map[string]DirEntry{}
	for _, e := range es {
		m[e.Name] = e
	}
	return m
}
