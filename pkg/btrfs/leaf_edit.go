package btrfs

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
)

// leafEdit is an in-memory copy of one leaf's items that can be changed by key and then
// encoded back into a block with the same header (bytenr, generation, owner).
type leafEdit struct {
	orig  *block
	items []leafItem
}

type leafItem struct {
	key  key
	data []byte
}

func newLeafEdit(b *block) *leafEdit {
	l := &leafEdit{orig: b, items: make([]leafItem, b.nritems())}
	for i := range l.items {
		l.items[i] = leafItem{b.keys[i], append([]byte(nil), b.data(i)...)}
	}
	return l
}

func (l *leafEdit) find(k key) (int, bool) {
	i := sort.Search(len(l.items), func(i int) bool { return l.items[i].key.cmp(k) >= 0 })
	return i, i < len(l.items) && l.items[i].key == k
}

// get returns the body of item k (a copy the caller may change), or nil.
func (l *leafEdit) get(k key) []byte {
	if i, ok := l.find(k); ok {
		return append([]byte(nil), l.items[i].data...)
	}
	return nil
}

// put replaces or inserts item k, keeping the items sorted.
func (l *leafEdit) put(k key, data []byte) {
	if i, ok := l.find(k); ok {
		l.items[i] = leafItem{k, data}
	} else {
		l.items = slices.Insert(l.items, i, leafItem{k, data})
	}
}

func (l *leafEdit) del(k key) {
	if i, ok := l.find(k); ok {
		l.items = append(l.items[:i], l.items[i+1:]...)
	}
}

// need is the bytes the items take with the header.
func (l *leafEdit) need() int {
	n := headerSize
	for _, it := range l.items {
		n += itemHdrSize + len(it.data)
	}
	return n
}

// fits reports whether the items fit in the leaf.
func (l *leafEdit) fits() bool { return l.need() <= len(l.orig.buf) }

// encode lays the items out the way btrfs does (headers from the front, bodies packed
// backwards from the end, item 0's body last), zeroes the free space and sets the checksum.
func (l *leafEdit) encode() ([]byte, error) {
	size := len(l.orig.buf)
	if !l.fits() {
		return nil, noRoomf("leaf %d would need %d bytes but holds %d; splitting a leaf is out of reach", l.orig.logical, l.need(), size)
	}
	buf := make([]byte, size)
	copy(buf, l.orig.buf[:headerSize])
	le.PutUint32(buf[0x60:], uint32(len(l.items)))
	end := size - headerSize
	for i, it := range l.items {
		end -= len(it.data)
		h := buf[headerSize+i*itemHdrSize:]
		it.key.put(h)
		le.PutUint32(h[keySize:], uint32(end))
		le.PutUint32(h[keySize+4:], uint32(len(it.data)))
		copy(buf[headerSize+end:], it.data)
	}
	setCsum(buf)
	return buf, nil
}

// String names the leaf in error messages.
func (l *leafEdit) String() string { return fmt.Sprintf("leaf %d", l.orig.logical) }

// blockWrite is one copy of one edited leaf, with the bytes it replaces for a roll-back.
type blockWrite struct {
	logical  uint64
	phys     int64
	new, old []byte
}

// commit encodes and re-validates every edited leaf, then writes each copy of each leaf. If a
// write fails, the copies already written are put back as they were.
func (w *writePlan) commit(dev io.WriterAt) error {
	fs := w.fs
	var writes []blockWrite
	for _, l := range w.leaves {
		buf, err := l.encode()
		if err != nil {
			return err
		}
		if l.orig.logical != fs.fsTree.logical {
			// The parent node keys each child by its first item; we do not touch nodes.
			if len(l.items) == 0 {
				return unsupportedf("%v would become empty; removing a leaf is out of reach", l)
			}
			if l.items[0].key != l.orig.keys[0] {
				return unsupportedf("%v would get a new first key (%v instead of %v); updating its parent node is out of reach", l, l.items[0].key, l.orig.keys[0])
			}
		}
		if _, err := fs.parseBlock(l.orig.logical, buf); err != nil {
			return fmt.Errorf("internal error, edited %v does not verify: %w", l, err)
		}
		phys, err := fs.physical(l.orig.logical, len(buf))
		if err != nil {
			return err
		}
		for _, p := range phys {
			old := make([]byte, len(buf))
			if err := readFull(fs.dev, old, p); err != nil {
				return fmt.Errorf("reading %v at device offset %d before writing it: %w", l, p, err)
			}
			writes = append(writes, blockWrite{l.orig.logical, p, buf, old})
		}
	}
	for i, wr := range writes {
		if _, err := dev.WriteAt(wr.new, wr.phys); err != nil {
			err = fmt.Errorf("writing tree block %d at device offset %d: %w", wr.logical, wr.phys, err)
			return errors.Join(err, rollback(dev, writes[:i+1]))
		}
	}
	return nil
}

// rollback restores the original bytes of blocks written so far; the last one may have failed
// without writing anything, so only failures on the earlier ones are reported.
func rollback(dev io.WriterAt, done []blockWrite) error {
	var errs []error
	for i := len(done) - 1; i >= 0; i-- {
		if _, err := dev.WriteAt(done[i].old, done[i].phys); err != nil && i < len(done)-1 {
			errs = append(errs, fmt.Errorf("restoring tree block %d at device offset %d failed, the filesystem may be inconsistent: %w", done[i].logical, done[i].phys, err))
		}
	}
	return errors.Join(errs...)
}
