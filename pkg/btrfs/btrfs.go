// Package btrfs reads a small single-device btrfs filesystem (Flatcar's OEM partition) and
// rewrites or creates small files in place as inline extents (plain or zlib-compressed).
//
// It is deliberately narrow: no transactions, no copy-on-write, no tree rebalancing. A write
// edits the leaves that hold the file's items, keeps their generation, recomputes their
// checksums and writes every copy; anything beyond that is refused with ErrUnsupported before a
// single byte is written.
package btrfs

import (
	"errors"
	"fmt"
	"io"
	"time"
)

var (
	// errNotBtrfs means there is no btrfs superblock magic at 64 KiB.
	errNotBtrfs = errors.New("not a btrfs filesystem")
	// errUnsupported marks a valid filesystem layout this package deliberately does not handle.
	errUnsupported = errors.New("unsupported btrfs layout")
	// errCorrupt marks on-disk data that breaks the format (bad checksum, impossible values).
	errCorrupt = errors.New("btrfs corrupt")
)

// FS is an opened filesystem. Tree blocks are read from the device on every call, so a
// WriteFile is visible to later reads without any cache to invalidate.
type FS struct {
	dev     io.ReaderAt
	w       io.WriterAt // dev, when it takes writes (WriteFile)
	size    int64
	sb      superblock
	chunks  chunkMap
	fsTree  treeRoot
	rootDir uint64
	// subvolumes are roots other than the FS tree (snapshots may share our leaves).
	subvolumes bool
	// Now is the time WriteFile stamps on what it changes (zero: epoch.Now): a build passes its
	// epoch, so the same inputs give the same bytes.
	Now time.Time
}

// Open reads the superblock, the chunk tree and the root tree of the filesystem on dev.
// WriteFile writes to dev when it is also an io.WriterAt.
func Open(dev io.ReaderAt, size int64) (*FS, error) {
	sb, err := readSuperblock(dev, size)
	if err != nil {
		return nil, err
	}
	fs := &FS{dev: dev, size: size, sb: sb}
	fs.w, _ = dev.(io.WriterAt)
	if fs.chunks, err = parseSysChunkArray(sb.sysChunkArray); err != nil {
		return nil, fmt.Errorf("btrfs superblock sys_chunk_array: %w", err)
	}
	if err := fs.loadChunkTree(); err != nil {
		return nil, err
	}
	if err := fs.loadRootTree(); err != nil {
		return nil, err
	}
	return fs, nil
}

// unsupportedf returns an error wrapping ErrUnsupported with a message saying what is out of reach.
func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnsupported, fmt.Sprintf(format, args...))
}

// ErrNoRoom marks new content that an in-place rewrite has no room for: more than one inline
// extent holds, or more than its leaf has free. It comes with ErrUnsupported; callers that can
// tell the user how to make the content smaller test for it.
var ErrNoRoom = errors.New("no room for the new content in place")

// noRoomf is unsupportedf for content that does not fit; the error matches ErrNoRoom too.
func noRoomf(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", errUnsupported, ErrNoRoom, fmt.Sprintf(format, args...))
}

// corruptf reports on-disk data that breaks the format.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errCorrupt, fmt.Sprintf(format, args...))
}

// wrapf adds context to err; nil stays nil.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

const (
	fsTreeObjectID   = 5
	firstFreeObjID   = 256
	lastFreeObjID    = maxU64 - 256 // BTRFS_LAST_FREE_OBJECTID (-256)
	rootItemMinSize  = 239
	rootItemBytenr   = 176
	rootItemRootDir  = 168
	rootItemLevelOff = 238
)

// loadChunkTree adds every CHUNK_ITEM of the chunk tree to the bootstrap map.
func (fs *FS) loadChunkTree() error {
	var found []chunk
	lo, hi := key{firstChunkTree, typeChunkItem, 0}, key{firstChunkTree, typeChunkItem, maxU64}
	err := fs.walk(treeRoot{fs.sb.chunkRoot, fs.sb.chunkLevel}, lo, hi, func(b *block, slot int) (bool, error) {
		c, _, err := parseChunk(b.keys[slot].offset, b.data(slot))
		found = append(found, c)
		return true, err
	})
	if err != nil {
		return wrapf(err, "reading the chunk tree")
	}
	for _, c := range found {
		if err := fs.chunks.add(c); err != nil {
			return wrapf(err, "reading the chunk tree")
		}
	}
	return nil
}

// loadRootTree finds the FS tree (the top-level subvolume) and notes whether other
// subvolumes or snapshots exist.
func (fs *FS) loadRootTree() error {
	rootTree := treeRoot{fs.sb.root, fs.sb.rootLevel}
	b, slot, err := fs.last(rootTree, key{fsTreeObjectID, typeRootItem, maxU64})
	if err != nil {
		return wrapf(err, "reading the root tree")
	}
	if b == nil || b.keys[slot].objectID != fsTreeObjectID || b.keys[slot].typ != typeRootItem {
		return corruptf("root tree has no ROOT_ITEM for the FS tree")
	}
	ri := b.data(slot)
	if len(ri) < rootItemMinSize {
		return corruptf("FS tree ROOT_ITEM is %d bytes", len(ri))
	}
	fs.fsTree = treeRoot{le.Uint64(ri[rootItemBytenr:]), ri[rootItemLevelOff]}
	fs.rootDir = le.Uint64(ri[rootItemRootDir:])
	if fs.fsTree.level > maxTreeLevel {
		return corruptf("FS tree level %d", fs.fsTree.level)
	}
	if _, err := fs.readBlock(fs.fsTree.logical, fs.fsTree.level); err != nil {
		return wrapf(err, "reading the FS tree root")
	}
	err = fs.walk(rootTree, key{firstFreeObjID, 0, 0}, key{lastFreeObjID, 0xff, maxU64}, func(b *block, slot int) (bool, error) {
		fs.subvolumes = b.keys[slot].typ == typeRootItem
		return !fs.subvolumes, nil
	})
	return wrapf(err, "reading the root tree")
}
