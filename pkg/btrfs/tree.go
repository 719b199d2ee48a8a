package btrfs

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"sort"
)

const (
	keySize     = 17 // struct btrfs_disk_key
	headerSize  = 0x65
	itemHdrSize = keySize + 8 // key, data offset, data size
	ptrSize     = keySize + 16
	maxU64      = ^uint64(0)

	// readBudget caps the tree blocks one lookup may read, so a crafted tree that points many
	// times at the same blocks cannot make a call run for ever.
	readBudget = 1 << 16
)

// key orders every item of a tree: objectid, then type, then offset.
type key struct {
	objectID uint64
	typ      uint8
	offset   uint64
}

func parseKey(b []byte) key {
	return key{binary.LittleEndian.Uint64(b), b[8], binary.LittleEndian.Uint64(b[9:])}
}

func (k key) put(b []byte) {
	binary.LittleEndian.PutUint64(b, k.objectID)
	b[8] = k.typ
	binary.LittleEndian.PutUint64(b[9:], k.offset)
}

func (k key) cmp(o key) int {
	return cmp.Or(cmp.Compare(k.objectID, o.objectID), cmp.Compare(k.typ, o.typ), cmp.Compare(k.offset, o.offset))
}

func (k key) String() string { return fmt.Sprintf("(%d %d %d)", k.objectID, k.typ, k.offset) }

// treeRoot is where a tree starts.
type treeRoot struct {
	logical uint64
	level   uint8
}

// block is one checksum-verified tree block (node or leaf).
type block struct {
	logical uint64
	buf     []byte
	level   uint8
	gen     uint64
	owner   uint64
	keys    []key
	// leaves: item data ranges inside buf; nodes: child pointers.
	itemOff, itemSize []uint32
	children          []uint64
}

func (b *block) nritems() int { return len(b.keys) }

// data returns the body of leaf item slot.
func (b *block) data(slot int) []byte {
	off := headerSize + b.itemOff[slot]
	return b.buf[off : off+b.itemSize[slot]]
}

// readBlock reads the tree block at logical from the first copy whose checksum and header
// are right, and checks it is at level want.
func (fs *FS) readBlock(logical uint64, want uint8) (*block, error) {
	phys, err := fs.physical(logical, int(fs.sb.nodeSize))
	if err != nil {
		return nil, fmt.Errorf("tree block %d: %w", logical, err)
	}
	var firstErr error
	for _, p := range phys {
		buf := make([]byte, fs.sb.nodeSize)
		if err := readFull(fs.dev, buf, p); err != nil {
			firstErr = cmp.Or(firstErr, fmt.Errorf("reading tree block %d at device offset %d: %w", logical, p, err))
			continue
		}
		b, err := fs.parseBlock(logical, buf)
		if err == nil && b.level != want {
			err = corruptf("tree block %d has level %d, its parent says %d", logical, b.level, want)
		}
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		return b, nil
	}
	return nil, firstErr
}

// parseBlock verifies a tree block image and decodes its header and item table.
func (fs *FS) parseBlock(logical uint64, buf []byte) (*block, error) {
	if got, want := blockCsum(buf), storedCsum(buf); got != want {
		return nil, corruptf("tree block %d: checksum mismatch (stored %#08x, computed %#08x)", logical, want, got)
	}
	if !bytes.Equal(buf[0x20:0x30], fs.sb.metadataUUID[:]) {
		return nil, corruptf("tree block %d belongs to another filesystem (fsid differs)", logical)
	}
	if at := le.Uint64(buf[0x30:]); at != logical {
		return nil, corruptf("tree block read at %d says it lives at %d", logical, at)
	}
	b := &block{logical: logical, buf: buf, gen: le.Uint64(buf[0x50:]), owner: le.Uint64(buf[0x58:]), level: buf[0x64]}
	n := int(le.Uint32(buf[0x60:]))
	space := len(buf) - headerSize
	if b.level > maxTreeLevel {
		return nil, corruptf("tree block %d has level %d", logical, b.level)
	}
	entry := itemHdrSize
	if b.level > 0 {
		entry = ptrSize
	}
	if n > space/entry || b.level > 0 && n == 0 {
		return nil, corruptf("tree block %d claims %d items", logical, n)
	}
	b.keys = make([]key, n)
	end := uint32(space) // leaf item data is packed backwards from the block's end
	for i := 0; i < n; i++ {
		e := buf[headerSize+i*entry:]
		b.keys[i] = parseKey(e)
		if i > 0 && b.keys[i-1].cmp(b.keys[i]) >= 0 {
			return nil, corruptf("tree block %d: keys out of order at slot %d", logical, i)
		}
		if b.level > 0 {
			b.children = append(b.children, le.Uint64(e[keySize:]))
			continue
		}
		off, size := le.Uint32(e[keySize:]), le.Uint32(e[keySize+4:])
		if off+size != end || off < uint32(n*itemHdrSize) || off > end {
			return nil, corruptf("tree block %d: item %d data [%d, +%d) is not packed after the previous item", logical, i, off, size)
		}
		end = off
		b.itemOff, b.itemSize = append(b.itemOff, off), append(b.itemSize, size)
	}
	return b, nil
}

// walk calls fn for every leaf item with lo <= key <= hi, in key order, until fn returns false.
func (fs *FS) walk(root treeRoot, lo, hi key, fn func(b *block, slot int) (bool, error)) error {
	budget := readBudget
	_, err := fs.walkBlock(root.logical, root.level, lo, hi, &budget, fn)
	return err
}

func (fs *FS) walkBlock(logical uint64, level uint8, lo, hi key, budget *int, fn func(*block, int) (bool, error)) (bool, error) {
	if *budget--; *budget < 0 {
		return false, corruptf("tree too large or cyclic (more than %d blocks for one lookup)", readBudget)
	}
	b, err := fs.readBlock(logical, level)
	if err != nil {
		return false, err
	}
	if level == 0 {
		for i := sort.Search(b.nritems(), func(i int) bool { return b.keys[i].cmp(lo) >= 0 }); i < b.nritems() && b.keys[i].cmp(hi) <= 0; i++ {
			if more, err := fn(b, i); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	// child i covers [keys[i], keys[i+1]); start at the last child whose first key is <= lo.
	i := sort.Search(b.nritems(), func(i int) bool { return b.keys[i].cmp(lo) > 0 }) - 1
	for i = max(i, 0); i < b.nritems() && b.keys[i].cmp(hi) <= 0; i++ {
		if more, err := fs.walkBlock(b.children[i], level-1, lo, hi, budget, fn); !more || err != nil {
			return false, err
		}
	}
	return true, nil
}

// last returns the leaf and slot of the greatest item with key <= k, or a nil block if none.
func (fs *FS) last(root treeRoot, k key) (*block, int, error) {
	budget := readBudget
	return fs.lastIn(root.logical, root.level, k, &budget)
}

func (fs *FS) lastIn(logical uint64, level uint8, k key, budget *int) (*block, int, error) {
	if *budget--; *budget < 0 {
		return nil, 0, corruptf("tree too large or cyclic (more than %d blocks for one lookup)", readBudget)
	}
	b, err := fs.readBlock(logical, level)
	if err != nil {
		return nil, 0, err
	}
	i := sort.Search(b.nritems(), func(i int) bool { return b.keys[i].cmp(k) > 0 }) - 1
	if level == 0 {
		if i < 0 {
			return nil, 0, nil
		}
		return b, i, nil
	}
	for ; i >= 0; i-- { // an empty child sends us to its left neighbour
		if l, s, err := fs.lastIn(b.children[i], level-1, k, budget); l != nil || err != nil {
			return l, s, err
		}
	}
	return nil, 0, nil
}

// leafFor returns the leaf that holds k or would receive it on insertion: the leaf found by
// descending through the last pointer whose key is <= k.
func (fs *FS) leafFor(root treeRoot, k key) (*block, error) {
	logical, level := root.logical, root.level
	for {
		b, err := fs.readBlock(logical, level)
		if err != nil || level == 0 {
			return b, err
		}
		i := sort.Search(b.nritems(), func(i int) bool { return b.keys[i].cmp(k) > 0 }) - 1
		logical, level = b.children[max(i, 0)], level-1
	}
}

// lookup returns the body of the item with exactly key k, or nil.
func (fs *FS) lookup(root treeRoot, k key) ([]byte, error) {
	b, slot, err := fs.last(root, k)
	if err != nil || b == nil || b.keys[slot] != k {
		return nil, err
	}
	return b.data(slot), nil
}
