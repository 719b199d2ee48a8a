// Package fsfile is the open file and the open directory of the io/fs filesystems flatcar-capo
// implements (disk.FS, btrfs.FS), which cannot share them otherwise: disk imports btrfs.
package fsfile

import (
	"errors"
	"io"
	"io/fs"
)

// File is an open regular file.
type File struct {
	*io.SectionReader
	Info fs.FileInfo
}

func (f *File) Stat() (fs.FileInfo, error) { return f.Info, nil }
func (f *File) Close() error               { return nil }

// Dir is an open directory (an fs.ReadDirFile); List gives its entries, on the first ReadDir.
type Dir struct {
	Name    string
	Info    fs.FileInfo
	List    func() ([]fs.DirEntry, error)
	entries []fs.DirEntry
	read    bool
}

func (d *Dir) Stat() (fs.FileInfo, error) { return d.Info, nil }
func (d *Dir) Close() error               { return nil }
func (d *Dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.Name, Err: errors.New("is a directory")}
}

// ReadDir returns the next n entries (all with n <= 0), as fs.ReadDirFile says.
func (d *Dir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		es, err := d.List()
		if err != nil {
			return nil, err
		}
		d.entries, d.read = es, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n:n]
	d.entries = d.entries[n:]
	return out, nil
}
