package btrfs

import (
	"fmt"
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
