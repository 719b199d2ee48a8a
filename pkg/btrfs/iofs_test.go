package btrfs

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
)

// TestIOFS: every layout mkfs.btrfs makes of an OEM partition meets io/fs's contract
// (fstest.TestFS: Open, ReadDir, ReadFile, Stat, bad names refused), and WriteFile's change is
// what the io/fs view then reads.
func TestIOFS(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			files := qemuOEM(v.grub)
			fsys, _ := openImage(t, mkImage(t, v, files))
			var expected []string
			for p := range files {
				expected = append(expected, ioName(p))
			}
			if err := fstest.TestFS(fsys, expected...); err != nil {
				t.Fatal(err)
			}
			if err := fsys.WriteFile("oem-release", []byte("ID=openstack\n")); err != nil {
				t.Fatal(err)
			}
			if got, err := fs.ReadFile(fsys, "oem-release"); err != nil || !bytes.Equal(got, []byte("ID=openstack\n")) {
				t.Errorf("fs.ReadFile after WriteFile = %q, %v", got, err)
			}
			if err := fstest.TestFS(fsys, expected...); err != nil {
				t.Errorf("after WriteFile: %v", err)
			}
			for _, bad := range []string{"/grub.cfg", "sysext/../oem-release", ""} {
				if err := fsys.WriteFile(bad, nil); !errors.Is(err, fs.ErrInvalid) {
					t.Errorf("WriteFile(%q) = %v, want fs.ErrInvalid", bad, err)
				}
			}
		})
	}
}

// TestWriteFileReadOnlyDevice: a device without WriteAt gives an FS whose WriteFile fails.
func TestWriteFileReadOnlyDevice(t *testing.T) {
	_, f := openImage(t, mkImage(t, mixedSingle, qemuOEM(true)))
	st, _ := f.Stat()
	fsys, err := Open(readerOnly{f}, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("grub.cfg", []byte("x")); err == nil {
		t.Error("WriteFile on a read-only device succeeded")
	}
}

type readerOnly struct {
	r interface {
		ReadAt([]byte, int64) (int, error)
	}
}

func (r readerOnly) ReadAt(p []byte, off int64) (int, error) { return r.r.ReadAt(p, off) }
