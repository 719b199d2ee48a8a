package btrfs

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/epoch"
)

const (
	// defaultMaxInline is the kernel's max_inline mount option default.
	defaultMaxInline = 2048
	maxNameLen       = 255
	headerFlagReloc  = 1 << 1
)

// MaxInline is the most bytes an inline extent may store (compressed or not): the kernel's
// default max_inline, less than a sector, and what one leaf can hold next to the item header.
// Uncompressed content up to this size is stored as it is; larger content, up to a sector,
// only when zlib shrinks it to this size.
func (fs *FS) MaxInline() int {
	return min(defaultMaxInline, int(fs.sb.sectorSize)-1, int(fs.sb.nodeSize)-headerSize-itemHdrSize-extentInlineHdr)
}

// writeTo replaces the contents of the file at p with data, stored as one inline extent,
// or creates the file (mode 0644, root-owned) when its directory exists but it does not. The
// extent is zlib-compressed when the file's old extent was and compression pays, or when only
// the compressed form fits; otherwise it is stored uncompressed. Every change is computed and
// checked in memory first; anything that would need a new tree block, a leaf split or extent
// tree changes returns an ErrUnsupported error before anything is written.
func (fs *FS) writeTo(dev io.WriterAt, p string, data []byte) (err error) {
	defer func() {
		if err != nil {
			err = &os.PathError{Op: "write", Path: p, Err: err}
		}
	}()
	names := splitPath(p)
	if len(names) == 0 {
		return errors.New("is the root directory")
	}
	if err := fs.writable(); err != nil {
		return err
	}
	content, err := fs.newInlineData(data)
	if err != nil {
		return err
	}
	name := names[len(names)-1]
	dir, err := fs.resolve("write", "/"+strings.Join(names[:len(names)-1], "/"))
	if err != nil {
		return err
	}
	if !dir.item.isDir() {
		return fmt.Errorf("%s is not a directory", path.Dir(path.Clean("/"+p)))
	}
	e, ok, err := fs.lookupName(dir.ino, name)
	if err != nil {
		return err
	}
	w := &writePlan{fs: fs, now: fs.Now}
	if w.now.IsZero() {
		w.now = epoch.Now() // SOURCE_DATE_EPOCH: the same inputs give the same bytes
	}
	if ok {
		err = w.rewrite(e.location.objectID, content)
	} else {
		err = w.create(dir.ino, name, content)
	}
	if err != nil {
		return err
	}
	return w.commit(dev)
}

// writable refuses filesystems where an in-place leaf edit would be wrong or lost.
func (fs *FS) writable() error {
	switch {
	case fs.sb.logRoot != 0:
		return unsupportedf("the filesystem has a log tree waiting for replay (mount and unmount it once first)")
	case fs.subvolumes:
		return unsupportedf("the filesystem has subvolumes or snapshots, which may share leaves")
	case fs.sb.incompat&incompatZoned != 0:
		return unsupportedf("zoned filesystems cannot be rewritten in place")
	}
	return nil
}

// writePlan gathers the edited leaves of one WriteFile.
type writePlan struct {
	fs     *FS
	now    time.Time
	leaves []*leafEdit
}

// leaf returns the edit of the FS tree leaf that holds (or would receive) k.
func (w *writePlan) leaf(k key) (*leafEdit, error) {
	b, err := w.fs.leafFor(w.fs.fsTree, k)
	if err != nil {
		return nil, err
	}
	for _, l := range w.leaves {
		if l.orig.logical == b.logical {
			return l, nil
		}
	}
	if b.owner != fsTreeObjectID || le.Uint64(b.buf[0x38:])&headerFlagReloc != 0 {
		return nil, unsupportedf("leaf %d is owned by tree %d or under relocation", b.logical, b.owner)
	}
	l := newLeafEdit(b)
	w.leaves = append(w.leaves, l)
	return l, nil
}

// rewrite replaces the single inline extent (or absence of extents) of inode ino.
func (w *writePlan) rewrite(ino uint64, content inlineData) error {
	in, err := w.fs.readInode(ino)
	if err != nil {
		return err
	}
	if !in.item.isRegular() {
		return errors.New("not a regular file")
	}
	if f := in.item.flags(); f&(inodeImmutable|inodeAppend|inodeVerity) != 0 {
		return unsupportedf("inode flags %#x (immutable, append-only or verity)", f)
	}
	var extents []key
	wasCompressed := false
	err = w.fs.walk(w.fs.fsTree, key{ino, typeExtentData, 0}, key{ino, typeExtentData, maxU64}, func(b *block, slot int) (bool, error) {
		e, err := parseFileExtent(b.data(slot))
		if err == nil && (e.typ != extentInline || b.keys[slot].offset != 0) {
			err = unsupportedf("the file has regular (non-inline) extents; replacing them needs extent tree changes")
		}
		wasCompressed = e.compression != compressNone
		extents = append(extents, b.keys[slot])
		return err == nil, err
	})
	if err != nil {
		return err
	}
	data := content.raw
	ik, ek := key{ino, typeInodeItem, 0}, key{ino, typeExtentData, 0}
	if len(data) > 0 {
		err = w.putInline(ek, content.forms(wasCompressed, mayCompress(in.item)), len(data))
	} else if len(extents) > 0 {
		var l *leafEdit
		if l, err = w.leaf(ek); err == nil {
			l.del(ek)
		}
	}
	if err != nil {
		return err
	}
	// nbytes counts the uncompressed bytes of an inline extent, compressed or not (btrfs check).
	return w.updateInode(ik, func(i inodeItem, gen uint64) {
		i.setSize(uint64(len(data)))
		i.setNbytes(uint64(len(data)))
		i.touch(gen, w.now)
	})
}

// putInline stores the inline extent k of a file of size bytes in the first of forms that its
// leaf can hold; when none fits, the last (smallest) stays and commit refuses the full leaf.
func (w *writePlan) putInline(k key, forms []extentBody, size int) error {
	if len(forms) == 0 {
		return noRoomf("%d bytes do not fit in an uncompressed inline extent (at most %d) and the inode forbids compression", size, w.fs.MaxInline())
	}
	l, err := w.leaf(k)
	if err != nil {
		return err
	}
	for _, body := range forms {
		if l.put(k, body(l.orig.gen)); l.fits() {
			break
		}
	}
	return nil
}

// put sets item k to body(generation of the leaf that receives it).
func (w *writePlan) put(k key, body func(gen uint64) []byte) error {
	l, err := w.leaf(k)
	if err == nil {
		l.put(k, body(l.orig.gen))
	}
	return err
}

// updateInode applies change to the INODE_ITEM with key k; gen is its leaf's generation.
func (w *writePlan) updateInode(k key, change func(i inodeItem, gen uint64)) error {
	l, err := w.leaf(k)
	if err != nil {
		return err
	}
	b := l.get(k)
	if len(b) < inodeItemSize {
		return corruptf("INODE_ITEM %v missing or short in leaf %d", k, l.orig.logical)
	}
	change(inodeItem(b), l.orig.gen)
	l.put(k, b)
	return nil
}

// create adds a regular file name in directory dir holding content.
func (w *writePlan) create(dir uint64, name string, content inlineData) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("file name longer than %d bytes", maxNameLen)
	}
	fs := w.fs
	dk := key{dir, typeDirItem, nameHash(name)}
	if b, err := fs.lookup(fs.fsTree, dk); err != nil || b != nil {
		return cmp.Or(err, unsupportedf("another name in the directory has the same hash; appending to its DIR_ITEM is out of reach"))
	}
	ino, err := fs.nextInode()
	if err != nil {
		return err
	}
	index, err := fs.nextDirIndex(dir)
	if err != nil {
		return err
	}
	data := content.raw
	ik := key{ino, typeInodeItem, 0}
	entry := dirEntry{ik, ftRegFile, name}
	err = errors.Join(
		w.put(ik, func(gen uint64) []byte {
			i := newFileInode(gen, w.now)
			i.setSize(uint64(len(data)))
			i.setNbytes(uint64(len(data)))
			return i
		}),
		w.put(key{ino, typeInodeRef, dir}, func(uint64) []byte { return marshalInodeRef(index, name) }),
		w.put(dk, func(gen uint64) []byte { return marshalDirItem(entry, gen) }),
		w.put(key{dir, typeDirIndex, index}, func(gen uint64) []byte { return marshalDirItem(entry, gen) }),
	)
	if err == nil && len(data) > 0 {
		err = w.putInline(key{ino, typeExtentData, 0}, content.forms(false, true), len(data))
	}
	if err != nil {
		return err
	}
	// A directory's size counts every name twice (DIR_ITEM and DIR_INDEX).
	return w.updateInode(key{dir, typeInodeItem, 0}, func(i inodeItem, gen uint64) {
		i.setSize(i.size() + 2*uint64(len(name)))
		i.touch(gen, w.now)
	})
}

// nextInode is one above the highest object id in the FS tree, as the kernel picks it.
func (fs *FS) nextInode() (uint64, error) {
	b, slot, err := fs.last(fs.fsTree, key{lastFreeObjID, 0xff, maxU64})
	if err != nil {
		return 0, err
	}
	next := uint64(firstFreeObjID)
	if b != nil {
		next = max(next, b.keys[slot].objectID+1)
	}
	if next >= lastFreeObjID {
		return 0, unsupportedf("no free inode number")
	}
	return next, nil
}

// nextDirIndex is one above the directory's highest DIR_INDEX (2 for an empty directory).
func (fs *FS) nextDirIndex(dir uint64) (uint64, error) {
	b, slot, err := fs.last(fs.fsTree, key{dir, typeDirIndex, maxU64})
	if err != nil || b == nil || b.keys[slot].objectID != dir || b.keys[slot].typ != typeDirIndex {
		return 2, err
	}
	if b.keys[slot].offset >= maxU64-1 {
		return 0, unsupportedf("directory index counter exhausted")
	}
	return max(b.keys[slot].offset+1, 2), nil
}

// Inode flags under which the kernel never compresses a file's data.
const (
	inodeNodatasum  = 1 << 0
	inodeNodatacow  = 1 << 1
	inodeNocompress = 1 << 3
)

// zlibLevel is the kernel's default compress=zlib level; Go writes the same 0x78 0x5e header.
const zlibLevel = 3

// inlineData is new file content with the inline extent forms that can hold it.
type inlineData struct {
	raw     []byte
	plainOK bool   // fits an uncompressed inline extent
	zlib    []byte // a plain zlib stream (the kernel's inline format), or nil when it does not pay or fit
}

// newInlineData applies the kernel's inline rules (can_cow_file_range_inline) and those of
// btrfs check: the stored bytes, compressed or not, stay within MaxInline; uncompressed
// content must also be below a sector; compressed content may be up to a sector and must
// shrink. It refuses content no inline form can hold.
func (fs *FS) newInlineData(data []byte) (inlineData, error) {
	d := inlineData{raw: data, plainOK: len(data) <= fs.MaxInline()}
	if len(data) > 0 && len(data) <= int(fs.sb.sectorSize) {
		var b bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&b, zlibLevel) // a constant valid level cannot fail
		zw.Write(data)                              // a bytes.Buffer does not fail
		zw.Close()
		if b.Len() < len(data) && b.Len() <= fs.MaxInline() {
			d.zlib = b.Bytes()
		}
	}
	if !d.plainOK && d.zlib == nil {
		return d, noRoomf("%d bytes do not fit in an inline extent (at most %d stored bytes, and at most %d before zlib compression); writing regular extents is out of reach",
			len(data), fs.MaxInline(), fs.sb.sectorSize)
	}
	return d, nil
}

// extentBody builds an EXTENT_DATA body for generation gen.
type extentBody func(gen uint64) []byte

// forms lists the extent bodies to try, preferred first. A file whose extent was compressed
// stays compressed when zlib pays off (as the kernel keeps compressing it); otherwise the plain
// form comes first and zlib is the fallback when the plain one does not fit. mayCompress is
// false for inodes the kernel would not compress.
func (d inlineData) forms(wasCompressed, mayCompress bool) []extentBody {
	plain := func(gen uint64) []byte { return marshalInlineExtent(gen, len(d.raw), compressNone, d.raw) }
	packed := func(gen uint64) []byte { return marshalInlineExtent(gen, len(d.raw), compressZlib, d.zlib) }
	switch {
	case !mayCompress || d.zlib == nil:
		if d.plainOK {
			return []extentBody{plain}
		}
		return nil
	case wasCompressed || !d.plainOK:
		return []extentBody{packed}
	}
	return []extentBody{plain, packed}
}

// mayCompress is false for inodes whose flags forbid compression.
func mayCompress(i inodeItem) bool {
	return i.flags()&(inodeNodatasum|inodeNodatacow|inodeNocompress) == 0
}
