package btrfs

import (
	"errors"
	"os"
	"path"
	"strings"
)

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

func notExist(op, p string) error { return &os.PathError{Op: op, Path: p, Err: os.ErrNotExist} }

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
			return cur, notExist(op, p)
		}
		if cur, err = fs.readInode(e.location.objectID); err != nil {
			return cur, &os.PathError{Op: op, Path: p, Err: err}
		}
	}
	return cur, nil
}
