package btrfs

import (
	"io"
	"path"
	"strings"
)

// generation is the inode's creation transaction, which only the tests read.
func (i inodeItem) generation() uint64 { return le.Uint64(i[0:]) }

// Label is the filesystem label (mkfs.btrfs -L).
func (fs *FS) Label() string { return fs.sb.label }

// DirEntry is what the tests compare of one file or directory.
type DirEntry struct {
	Name  string
	IsDir bool
	Size  int64
}

// ioName turns the tests' "/a/b" (or "a/b/") into the io/fs name "a/b" ("." for the root).
func ioName(p string) string {
	if p = strings.TrimPrefix(path.Clean("/"+p), "/"); p == "" {
		return "."
	}
	return p
}

// entry describes the file or directory at p; directories report size 0.
func (fs *FS) entry(p string) (DirEntry, error) {
	fi, err := fs.Stat(ioName(p))
	if err != nil {
		return DirEntry{}, err
	}
	e := DirEntry{Name: fi.Name(), IsDir: fi.IsDir()}
	if e.Name == "." {
		e.Name = "/"
	}
	if !e.IsDir {
		e.Size = fi.Size()
	}
	return e, nil
}

// list is ReadDir of p as DirEntry values.
func (fs *FS) list(p string) ([]DirEntry, error) {
	es, err := fs.ReadDir(ioName(p))
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(es))
	for _, e := range es {
		d := DirEntry{Name: e.Name(), IsDir: e.IsDir()}
		if fi, err := e.Info(); err == nil && !d.IsDir {
			d.Size = fi.Size()
		}
		out = append(out, d)
	}
	return out, nil
}

// read is ReadFile of the tests' path p.
func (fs *FS) read(p string) ([]byte, error) { return fs.ReadFile(ioName(p)) }

// write is WriteFile of the tests' path p through dev (a recorder, a failing device).
func (fs *FS) write(dev io.WriterAt, p string, data []byte) error { return fs.writeTo(dev, p, data) }
