package btrfs

import (
	"bytes"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/fsfile"
)

// The FS is an io/fs filesystem (fs.FS, fs.ReadDirFS, fs.ReadFileFS, fs.StatFS) with io/fs
// names ("grub.cfg", "sysext/x", "." for the root), plus WriteFile, the OEM edit. Symbolic
// links are not followed: an OEM partition has none, and Open refuses one.

// Type names the filesystem for reports and messages.
func (fs *FS) Type() string { return "btrfs" }

// checkName refuses what io/fs does not call a name ("/grub.cfg", "a//b", "..").
func checkName(op, name string) error {
	if !iofs.ValidPath(name) {
		return &iofs.PathError{Op: op, Path: name, Err: iofs.ErrInvalid}
	}
	return nil
}

// Stat describes the file or directory name.
func (fs *FS) Stat(name string) (iofs.FileInfo, error) {
	if err := checkName("stat", name); err != nil {
		return nil, err
	}
	in, err := fs.resolve("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), in: in.item}, nil
}

// ReadDir lists a directory, sorted by name as io/fs wants.
func (fs *FS) ReadDir(name string) ([]iofs.DirEntry, error) {
	if err := checkName("readdir", name); err != nil {
		return nil, err
	}
	return fs.readDir(name)
}

// ReadFile returns the contents of the regular file name.
func (fs *FS) ReadFile(name string) ([]byte, error) {
	if err := checkName("read", name); err != nil {
		return nil, err
	}
	in, err := fs.resolve("read", name)
	if err != nil {
		return nil, err
	}
	if !in.item.isRegular() {
		return nil, &iofs.PathError{Op: "read", Path: name, Err: errors.New("not a regular file")}
	}
	data, err := fs.readData(in)
	if err != nil {
		return nil, &iofs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

// WriteFile rewrites name in place, or creates it (see writeTo), on the device the FS was
// opened on; a device that is not an io.WriterAt, or refuses writes, makes it fail.
func (fs *FS) WriteFile(name string, data []byte) error {
	if err := checkName("write", name); err != nil {
		return err
	}
	if fs.w == nil {
		return &iofs.PathError{Op: "write", Path: name, Err: errors.New("the btrfs filesystem was opened read-only")}
	}
	return fs.writeTo(fs.w, name, data)
}

// Open opens a directory (an fs.ReadDirFile) or a regular file (read whole: OEM files are small).
func (fs *FS) Open(name string) (iofs.File, error) {
	if err := checkName("open", name); err != nil {
		return nil, err
	}
	in, err := fs.resolve("open", name)
	if err != nil {
		return nil, err
	}
	info := fileInfo{name: path.Base(name), in: in.item}
	switch {
	case in.item.isDir():
		return &fsfile.Dir{Name: name, Info: info, List: func() ([]iofs.DirEntry, error) { return fs.readDir(name) }}, nil
	case in.item.isRegular():
		data, err := fs.readData(in)
		if err != nil {
			return nil, &iofs.PathError{Op: "open", Path: name, Err: err}
		}
		return &fsfile.File{SectionReader: io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), Info: info}, nil
	}
	return nil, &iofs.PathError{Op: "open", Path: name, Err: errors.New("not a regular file or a directory (symbolic links are not followed)")}
}

// fileInfo is an inode's io/fs view.
type fileInfo struct {
	name string
	in   inodeItem
}

func (fi fileInfo) Name() string        { return fi.name }
func (fi fileInfo) Size() int64         { return int64(min(fi.in.size(), 1<<62)) }
func (fi fileInfo) Mode() iofs.FileMode { return unixMode(fi.in.mode()) }
func (fi fileInfo) ModTime() time.Time {
	return time.Unix(int64(le.Uint64(fi.in[mtimeOff:])), int64(le.Uint32(fi.in[mtimeOff+8:])))
}
func (fi fileInfo) IsDir() bool { return fi.in.isDir() }
func (fi fileInfo) Sys() any    { return nil }

// unixMode turns st_mode into an io/fs mode.
func unixMode(m uint32) iofs.FileMode {
	mode := iofs.FileMode(m & 0o777)
	for bit, fm := range map[uint32]iofs.FileMode{0o4000: iofs.ModeSetuid, 0o2000: iofs.ModeSetgid, 0o1000: iofs.ModeSticky} {
		if m&bit != 0 {
			mode |= fm
		}
	}
	switch m & sIFMT {
	case sIFDIR:
		mode |= iofs.ModeDir
	case 0o120000:
		mode |= iofs.ModeSymlink
	case 0o010000:
		mode |= iofs.ModeNamedPipe
	case 0o140000:
		mode |= iofs.ModeSocket
	case 0o020000:
		mode |= iofs.ModeDevice | iofs.ModeCharDevice
	case 0o060000:
		mode |= iofs.ModeDevice
	}
	return mode
}

// dirEnt is one entry of ReadDir, its inode read already.
type dirEnt struct{ info fileInfo }

func (d dirEnt) Name() string                 { return d.info.name }
func (d dirEnt) IsDir() bool                  { return d.info.IsDir() }
func (d dirEnt) Type() iofs.FileMode          { return d.info.Mode().Type() }
func (d dirEnt) Info() (iofs.FileInfo, error) { return d.info, nil }

// readDir lists the directory p (lenient names, as the write path uses).
func (fs *FS) readDir(p string) ([]iofs.DirEntry, error) {
	dir, err := fs.resolve("readdir", p)
	if err != nil {
		return nil, err
	}
	if !dir.item.isDir() {
		return nil, &iofs.PathError{Op: "readdir", Path: p, Err: errors.New("not a directory")}
	}
	var entries []dirEntry
	err = fs.walk(fs.fsTree, key{dir.ino, typeDirIndex, 0}, key{dir.ino, typeDirIndex, maxU64}, func(b *block, slot int) (bool, error) {
		es, err := parseDirItems(b.data(slot))
		entries = append(entries, es...)
		return true, err
	})
	if err != nil {
		return nil, &iofs.PathError{Op: "readdir", Path: p, Err: err}
	}
	out := make([]iofs.DirEntry, 0, len(entries))
	for _, e := range entries {
		if e.location.typ != typeInodeItem { // a subvolume's root, listed as a directory
			sub := inodeItem(make([]byte, inodeItemSize))
			sub.setMode(sIFDIR | 0o755)
			out = append(out, dirEnt{fileInfo{name: e.name, in: sub}})
			continue
		}
		in, err := fs.readInode(e.location.objectID)
		if err != nil {
			return nil, &iofs.PathError{Op: "readdir", Path: p, Err: err}
		}
		out = append(out, dirEnt{fileInfo{name: e.name, in: in.item}})
	}
	slices.SortFunc(out, func(a, b iofs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// inode is a resolved inode number with a copy of its INODE_ITEM.
type inode struct {
	ino  uint64
	item inodeItem
}

// splitPath turns "/a/b" (or "a/b") into its clean components; "/" has none.
func splitPath(p string) []string {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// readInode returns the INODE_ITEM of ino.
func (fs *FS) readInode(ino uint64) (inode, error) {
	b, err := fs.lookup(fs.fsTree, key{ino, typeInodeItem, 0})
	if err != nil {
		return inode{}, err
	}
	if b == nil {
		return inode{}, corruptf("inode %d has a directory entry but no INODE_ITEM", ino)
	}
	if len(b) < inodeItemSize {
		return inode{}, corruptf("INODE_ITEM of inode %d is %d bytes", ino, len(b))
	}
	return inode{ino, inodeItem(append([]byte(nil), b[:inodeItemSize]...))}, nil
}

// lookupName finds name in directory dir through its DIR_ITEM (keyed by the name's hash);
// ok is false when there is no such entry.
func (fs *FS) lookupName(dir uint64, name string) (e dirEntry, ok bool, err error) {
	b, err := fs.lookup(fs.fsTree, key{dir, typeDirItem, nameHash(name)})
	if err != nil || b == nil {
		return e, false, err
	}
	entries, err := parseDirItems(b)
	if err != nil {
		return e, false, err
	}
	for _, e := range entries {
		if e.name == name {
			if e.location.typ != typeInodeItem {
				return e, false, unsupportedf("%q is a subvolume", name)
			}
			return e, true, nil
		}
	}
	return e, false, nil
}

// resolve walks p from the root directory.
func (fs *FS) resolve(op, p string) (inode, error) {
	cur, err := fs.readInode(fs.rootDir)
	if err != nil {
		return cur, wrapf(err, "root directory")
	}
	for _, name := range splitPath(p) {
		if !cur.item.isDir() {
			return cur, &os.PathError{Op: op, Path: p, Err: errors.New("a path component is not a directory")}
		}
		e, ok, err := fs.lookupName(cur.ino, name)
		if err != nil {
			return cur, &os.PathError{Op: op, Path: p, Err: err}
		}
		if !ok {
			return cur, &os.PathError{Op: op, Path: p, Err: os.ErrNotExist}
		}
		if cur, err = fs.readInode(e.location.objectID); err != nil {
			return cur, &os.PathError{Op: op, Path: p, Err: err}
		}
	}
	return cur, nil
}
