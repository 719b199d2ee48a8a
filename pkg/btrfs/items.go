package btrfs

import (
	"encoding/binary"
	"time"
)

// Item types (the middle field of a key).
const (
	typeInodeItem  = 1
	typeInodeRef   = 12
	typeDirItem    = 84
	typeDirIndex   = 96
	typeExtentData = 108
	typeRootItem   = 132
	typeChunkItem  = 228
)

// Directory entry file types (btrfs_dir_item.type).
const (
	ftRegFile = 1
	ftDir     = 2
)

const (
	sIFMT  = 0o170000
	sIFREG = 0o100000
	sIFDIR = 0o040000

	// Inode flags that forbid or complicate an in-place rewrite.
	inodeImmutable = 1 << 6
	inodeAppend    = 1 << 7
	inodeVerity    = 1 << 32 // ro_flags live in the upper half
)

var le = binary.LittleEndian

// inodeItem is a view of a 160-byte btrfs_inode_item; setters keep unknown bytes as they are.
type inodeItem []byte

const inodeItemSize = 160

func (i inodeItem) transid() uint64        { return le.Uint64(i[8:]) }
func (i inodeItem) size() uint64           { return le.Uint64(i[16:]) }
func (i inodeItem) mode() uint32           { return le.Uint32(i[52:]) }
func (i inodeItem) flags() uint64          { return le.Uint64(i[64:]) }
func (i inodeItem) sequence() uint64       { return le.Uint64(i[72:]) }
func (i inodeItem) isDir() bool            { return i.mode()&sIFMT == sIFDIR }
func (i inodeItem) isRegular() bool        { return i.mode()&sIFMT == sIFREG }
func (i inodeItem) setGeneration(v uint64) { le.PutUint64(i[0:], v) }
func (i inodeItem) setTransid(v uint64)    { le.PutUint64(i[8:], v) }
func (i inodeItem) setSize(v uint64)       { le.PutUint64(i[16:], v) }
func (i inodeItem) setNbytes(v uint64)     { le.PutUint64(i[24:], v) }
func (i inodeItem) setNlink(v uint32)      { le.PutUint32(i[40:], v) }
func (i inodeItem) setMode(v uint32)       { le.PutUint32(i[52:], v) }
func (i inodeItem) setSequence(v uint64)   { le.PutUint64(i[72:], v) }

// Timestamps: atime at 112, ctime 124, mtime 136, otime 148; each u64 seconds + u32 nanoseconds.
const (
	atimeOff = 112
	ctimeOff = 124
	mtimeOff = 136
	otimeOff = 148
)

func (i inodeItem) setTime(off int, t time.Time) {
	le.PutUint64(i[off:], uint64(t.Unix()))
	le.PutUint32(i[off+8:], uint32(t.Nanosecond()))
}

// touch records a content change made in a transaction with id gen.
func (i inodeItem) touch(gen uint64, now time.Time) {
	i.setTransid(max(i.transid(), gen))
	i.setSequence(i.sequence() + 1)
	i.setTime(ctimeOff, now)
	i.setTime(mtimeOff, now)
}

// newFileInode returns a regular file inode (0644, root-owned, one link) created now.
func newFileInode(gen uint64, now time.Time) inodeItem {
	i := inodeItem(make([]byte, inodeItemSize))
	i.setGeneration(gen)
	i.setTransid(gen)
	i.setNlink(1)
	i.setMode(sIFREG | 0o644)
	for _, off := range []int{atimeOff, ctimeOff, mtimeOff, otimeOff} {
		i.setTime(off, now)
	}
	return i
}

// dirEntry is one name packed in a DIR_ITEM or DIR_INDEX item.
type dirEntry struct {
	location key
	ftype    uint8
	name     string
}

const dirItemHdr = 30 // location key, transid u64, data_len u16, name_len u16, type u8

// parseDirItems splits a DIR_ITEM/DIR_INDEX body (several entries when names collide).
func parseDirItems(b []byte) ([]dirEntry, error) {
	var out []dirEntry
	for len(b) > 0 {
		if len(b) < dirItemHdr {
			return nil, corruptf("truncated directory entry")
		}
		dataLen, nameLen := int(le.Uint16(b[25:])), int(le.Uint16(b[27:]))
		if len(b) < dirItemHdr+nameLen+dataLen {
			return nil, corruptf("directory entry name/data overruns its item")
		}
		out = append(out, dirEntry{parseKey(b), b[29], string(b[dirItemHdr : dirItemHdr+nameLen])})
		b = b[dirItemHdr+nameLen+dataLen:]
	}
	return out, nil
}

func marshalDirItem(e dirEntry, transid uint64) []byte {
	b := make([]byte, dirItemHdr+len(e.name))
	e.location.put(b)
	le.PutUint64(b[17:], transid)
	le.PutUint16(b[27:], uint16(len(e.name)))
	b[29] = e.ftype
	copy(b[dirItemHdr:], e.name)
	return b
}

// marshalInodeRef is a one-name INODE_REF body: dir index, name length, name.
func marshalInodeRef(index uint64, name string) []byte {
	b := make([]byte, 10+len(name))
	le.PutUint64(b, index)
	le.PutUint16(b[8:], uint16(len(name)))
	copy(b[10:], name)
	return b
}

// File extent items (btrfs_file_extent_item).
const (
	extentInline   = 0
	extentRegular  = 1
	extentPrealloc = 2

	compressNone = 0
	compressZlib = 1
	compressZstd = 3 // Flatcar's /usr may be zstd-compressed

	extentInlineHdr = 21 // generation, ram_bytes, compression, encryption, other_encoding, type
	extentRegSize   = 53
)

type fileExtent struct {
	generation, ramBytes uint64
	compression, typ     uint8
	encoded              bool // encryption or other_encoding set
	inline               []byte
	// regular and prealloc extents
	diskBytenr, diskNumBytes, offset, numBytes uint64
}

func parseFileExtent(b []byte) (fileExtent, error) {
	if len(b) < extentInlineHdr {
		return fileExtent{}, corruptf("file extent item of %d bytes", len(b))
	}
	e := fileExtent{generation: le.Uint64(b), ramBytes: le.Uint64(b[8:]), compression: b[16],
		encoded: b[17] != 0 || le.Uint16(b[18:]) != 0, typ: b[20]}
	switch e.typ {
	case extentInline:
		e.inline = b[extentInlineHdr:]
	case extentRegular, extentPrealloc:
		if len(b) < extentRegSize {
			return e, corruptf("regular file extent item of %d bytes", len(b))
		}
		e.diskBytenr, e.diskNumBytes = le.Uint64(b[21:]), le.Uint64(b[29:])
		e.offset, e.numBytes = le.Uint64(b[37:]), le.Uint64(b[45:])
	default:
		return e, corruptf("file extent type %d", e.typ)
	}
	return e, nil
}

// marshalInlineExtent is an inline extent holding stored, the content of ramBytes bytes as
// compression (compressNone or compressZlib) left it.
func marshalInlineExtent(gen uint64, ramBytes int, compression uint8, stored []byte) []byte {
	b := make([]byte, extentInlineHdr+len(stored))
	le.PutUint64(b, gen)
	le.PutUint64(b[8:], uint64(ramBytes))
	b[16] = compression
	b[20] = extentInline
	copy(b[extentInlineHdr:], stored)
	return b
}
