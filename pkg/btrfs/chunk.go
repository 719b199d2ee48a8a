package btrfs

import (
	"fmt"
	"io"
	"slices"
	"sort"
)

const (
	chunkItemSize  = 48 // struct btrfs_chunk without its stripes
	stripeSize     = 32 // struct btrfs_stripe: devid, offset, dev_uuid
	maxStripes     = 16
	firstChunkTree = 256

	bgData      = 1 << 0
	bgSystem    = 1 << 1
	bgMetadata  = 1 << 2
	bgStriped   = 1<<3 | 1<<6 | 1<<7 | 1<<8 // RAID0, RAID10, RAID5, RAID6: copies are not whole
	bgMirrored  = 1<<4 | 1<<5 | 1<<9 | 1<<10
	bgKnownMask = bgData | bgSystem | bgMetadata | bgStriped | bgMirrored
)

// chunk maps a logical range to one or more physical copies on the device.
type chunk struct {
	logical, length uint64
	typ             uint64
	stripes         []stripe
}

type stripe struct {
	devID, offset uint64
}

// chunkMap is sorted by logical address with no overlaps.
type chunkMap []chunk

// parseChunk decodes a CHUNK_ITEM body at logical address logical; it returns the bytes consumed.
func parseChunk(logical uint64, b []byte) (chunk, int, error) {
	if len(b) < chunkItemSize {
		return chunk{}, 0, corruptf("chunk item at %d is %d bytes, shorter than %d", logical, len(b), chunkItemSize)
	}
	c := chunk{logical: logical, length: le.Uint64(b[0:]), typ: le.Uint64(b[24:])}
	n := int(le.Uint16(b[44:]))
	size := chunkItemSize + n*stripeSize
	switch {
	case n == 0 || n > maxStripes:
		return c, 0, corruptf("chunk at %d has %d stripes", logical, n)
	case len(b) < size:
		return c, 0, corruptf("chunk at %d: %d stripes do not fit in %d bytes", logical, n, len(b))
	case c.length == 0 || logical+c.length < logical:
		return c, 0, corruptf("chunk at %d has length %d", logical, c.length)
	case c.typ&^bgKnownMask != 0:
		return c, 0, corruptf("chunk at %d has unknown type bits %#x", logical, c.typ)
	}
	for i := 0; i < n; i++ {
		s := b[chunkItemSize+i*stripeSize:]
		c.stripes = append(c.stripes, stripe{devID: le.Uint64(s[0:]), offset: le.Uint64(s[8:])})
	}
	return c, size, nil
}

// parseSysChunkArray decodes the superblock's bootstrap chunks: (disk key, chunk) pairs that map
// the chunk tree itself.
func parseSysChunkArray(b []byte) (chunkMap, error) {
	var m chunkMap
	for len(b) > 0 {
		if len(b) < keySize {
			return nil, corruptf("truncated key in sys_chunk_array")
		}
		k := parseKey(b)
		if k.typ != typeChunkItem {
			return nil, corruptf("sys_chunk_array holds key type %d, want CHUNK_ITEM", k.typ)
		}
		c, n, err := parseChunk(k.offset, b[keySize:])
		if err != nil {
			return nil, err
		}
		if err := m.add(c); err != nil {
			return nil, err
		}
		b = b[keySize+n:]
	}
	if len(m) == 0 {
		return nil, corruptf("empty sys_chunk_array")
	}
	return m, nil
}

// add inserts c, ignoring an exact duplicate (the chunk tree repeats the system chunks).
func (m *chunkMap) add(c chunk) error {
	i := sort.Search(len(*m), func(i int) bool { return (*m)[i].logical >= c.logical })
	if i < len(*m) && (*m)[i].logical == c.logical && (*m)[i].length == c.length {
		(*m)[i] = c
		return nil
	}
	if i > 0 && (*m)[i-1].logical+(*m)[i-1].length > c.logical ||
		i < len(*m) && c.logical+c.length > (*m)[i].logical {
		return corruptf("chunk [%d, +%d) overlaps another chunk", c.logical, c.length)
	}
	*m = slices.Insert(*m, i, c)
	return nil
}

// physical returns the device offsets of every copy of [logical, logical+n).
func (fs *FS) physical(logical uint64, n int) ([]int64, error) {
	m := fs.chunks
	i := sort.Search(len(m), func(i int) bool { return m[i].logical+m[i].length > logical })
	if n <= 0 || i == len(m) || m[i].logical > logical || m[i].length-(logical-m[i].logical) < uint64(n) {
		return nil, corruptf("logical range [%d, +%d) is not inside one chunk", logical, n)
	}
	c := m[i]
	if c.typ&bgStriped != 0 && len(c.stripes) > 1 {
		return nil, unsupportedf("striped block group profile %#x at logical %d", c.typ&bgKnownMask, c.logical)
	}
	var out []int64
	for _, s := range c.stripes {
		if s.devID != fs.sb.devID {
			return nil, unsupportedf("chunk at logical %d has a copy on device %d, not this device (%d)", c.logical, s.devID, fs.sb.devID)
		}
		p := s.offset + (logical - c.logical)
		if p < s.offset || p > uint64(fs.size) || uint64(fs.size)-p < uint64(n) {
			return nil, corruptf("logical %d maps to %d, beyond the device end (%d bytes)", logical, p, fs.size)
		}
		out = append(out, int64(p))
	}
	return out, nil
}

// readLogical reads n bytes at logical from the first copy that can be read.
func (fs *FS) readLogical(logical uint64, n int) ([]byte, error) {
	phys, err := fs.physical(logical, n)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	for _, p := range phys {
		if err = readFull(fs.dev, b, p); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("reading logical %d (%d bytes): %w", logical, n, err)
}

// readFull reads len(p) bytes at off; a full read is success even when the reader also says
// io.EOF, as io.ReaderAt allows at the end of the device.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}
