package squashfs

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Directories and symlinks of their own are made only by the tests (sysext images hold files,
// their parents made by Create), to check the writer against mksquashfs on whole trees.

// Mkdir adds a directory (parents are made with mode 0755 as needed); making an existing
// directory sets its mode.
func (w *Writer) Mkdir(p string, mode fs.FileMode) error {
	clean := path.Clean(p)
	if clean == "." {
		w.root.mode = mode & modeBits
		return nil
	}
	dir, base, err := w.lookup(clean)
	if err != nil {
		if c := w.find(clean); c != nil && c.kind == typeDir {
			c.mode = mode & modeBits
			return nil
		}
		return err
	}
	dir.children[base] = &node{name: base, kind: typeDir, mode: mode & modeBits, children: map[string]*node{}, parent: dir}
	return nil
}

func (w *Writer) find(p string) *node {
	n := w.root
	for _, name := range strings.Split(p, "/") {
		if n = n.children[name]; n == nil {
			return nil
		}
	}
	return n
}

// Symlink adds a symbolic link p -> target.
func (w *Writer) Symlink(p, target string) error {
	dir, base, err := w.lookup(p)
	if err != nil {
		return err
	}
	if target == "" {
		return fmt.Errorf("%s: empty symlink target", p)
	}
	dir.children[base] = &node{name: base, kind: typeSymlink, mode: 0o777, target: target, parent: dir}
	return nil
}
