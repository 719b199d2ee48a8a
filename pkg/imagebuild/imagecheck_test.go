package imagebuild_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/filesystem/ext4"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// rootFS reads the ROOT partition of an image (raw or qcow2) with go-diskfs: what the image
// itself holds, not what a build log says.
type rootFS struct {
	t  *testing.T
	fs *ext4.FileSystem
}

func openRoot(t *testing.T, image string) (*rootFS, func()) {
	t.Helper()
	img, err := disk.Open(image, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := img.FindPartition("ROOT")
	if err != nil {
		img.Close()
		t.Fatal(err)
	}
	fsys, err := ext4.Read(disk.Backend(vdisk.Protect(img.Section(p)), true), p.Size, 0, 512)
	if err != nil {
		img.Close()
		t.Fatalf("reading ROOT of %s: %v", image, err)
	}
	return &rootFS{t: t, fs: fsys}, func() { img.Close() }
}

// rel turns /etc/x into go-diskfs' io/fs-style etc/x.
func rel(p string) string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "."
	}
	return p
}

func (r *rootFS) read(p string) []byte {
	r.t.Helper()
	b, err := r.fs.ReadFile(rel(p))
	if err != nil {
		r.t.Fatalf("ROOT%s: %v", p, err)
	}
	return b
}

func (r *rootFS) sha256(p string) string {
	s := sha256.Sum256(r.read(p))
	return hex.EncodeToString(s[:])
}

// entry returns the directory entry of p, or nil when it does not exist.
func (r *rootFS) entry(p string) fs.DirEntry {
	r.t.Helper()
	dir, name := "/", p
	if i := strings.LastIndex(p, "/"); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	list, err := r.fs.ReadDir(rel(dir))
	if err != nil {
		return nil
	}
	for _, e := range list {
		if e.Name() == name {
			return e
		}
	}
	return nil
}

func (r *rootFS) names(dir string) []string {
	list, _ := r.fs.ReadDir(rel(dir))
	var out []string
	for _, e := range list {
		out = append(out, e.Name())
	}
	return out
}

// absent passes when p is missing in ROOT or is an overlayfs whiteout (a character device: the
// file was deleted from the /etc overlay whose lower layer has it).
func (r *rootFS) absent(p string) bool {
	e := r.entry(p)
	if e == nil {
		return true
	}
	return e.Type()&fs.ModeCharDevice != 0 || e.Type()&fs.ModeDevice != 0
}
