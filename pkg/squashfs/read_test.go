package squashfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// An independent reader of the fields the writer sets, for comparing our images with
// mksquashfs' field by field (unsquashfs shows neither link counts nor parent inodes).

type sbFields struct {
	Magic, Inodes, MkfsTime, BlockSize, Fragments uint32
	Compression, BlockLog, Flags, IDs             uint16
	Major, Minor                                  uint16
	Root, BytesUsed, IDTable, Xattr               uint64
	InodeTable, DirTable, FragTable, ExportTab    uint64
}

type inode struct {
	Type, Mode, UID, GID uint16 // UID/GID: the ids themselves
	Mtime, Ino, Nlink    uint32
	Size                 uint64 // file size; directory: listing size + 3
	Parent               uint32 // directories
	Target               string
	Blocks               []uint32
	Frag, FragOff        uint32
	Start                uint64
	Index                []string // extended directory: "offset name" of each index entry
}

type image struct {
	t     testing.TB
	raw   []byte
	sb    sbFields
	ids   []uint32
	files map[string]inode
}

func readImage(t testing.TB, p string) *image {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	im := &image{t: t, raw: raw, files: map[string]inode{}}
	if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, &im.sb); err != nil {
		t.Fatal(err)
	}
	if im.sb.Major != 4 || im.sb.Minor != 0 || binary.LittleEndian.Uint32(raw) != magic {
		t.Fatalf("%s: not squashfs 4.0", p)
	}
	// id table: index of u64 pointers to metadata blocks of u32 ids
	idBlk := binary.LittleEndian.Uint64(raw[im.sb.IDTable:])
	ids, _ := im.meta(idBlk, 0, 4*int(im.sb.IDs))
	for i := 0; i < int(im.sb.IDs); i++ {
		im.ids = append(im.ids, binary.LittleEndian.Uint32(ids[4*i:]))
	}
	im.walk("", im.sb.Root)
	return im
}

func (im *image) decompress(b []byte) []byte {
	var r io.Reader
	var err error
	switch im.sb.Compression {
	case 1:
		r, err = zlib.NewReader(bytes.NewReader(b))
	case 6:
		var d *zstd.Decoder
		d, err = zstd.NewReader(bytes.NewReader(b))
		r = d
	default:
		err = fmt.Errorf("compression %d", im.sb.Compression)
	}
	if err != nil {
		im.t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		im.t.Fatal(err)
	}
	return out
}

// metaBlock returns the metadata block at pos (absolute), decompressed, and the next block's position.
func (im *image) metaBlock(pos uint64) ([]byte, uint64) {
	h := binary.LittleEndian.Uint16(im.raw[pos:])
	size := uint64(h &^ uncompMeta)
	blk := im.raw[pos+2 : pos+2+size]
	if h&uncompMeta == 0 {
		blk = im.decompress(blk)
	}
	return blk, pos + 2 + size
}

// meta reads n bytes of a metadata table from block position pos (absolute), offset off.
func (im *image) meta(pos uint64, off, n int) ([]byte, uint64) {
	var out []byte
	for len(out) < off+n {
		var blk []byte
		blk, pos = im.metaBlock(pos)
		out = append(out, blk...)
	}
	return out[off : off+n], pos
}

func (im *image) inodeAt(ref uint64) (inode, []byte) {
	b := im.metaUpTo(im.sb.InodeTable+ref>>16, int(ref&0xffff))
	le := binary.LittleEndian
	in := inode{Type: le.Uint16(b[0:]), Mode: le.Uint16(b[2:]), UID: uint16(im.ids[le.Uint16(b[4:])]),
		GID: uint16(im.ids[le.Uint16(b[6:])]), Mtime: le.Uint32(b[8:]), Ino: le.Uint32(b[12:])}
	b = b[16:]
	return in, b
}

// metaUpTo returns the rest of the metadata table from the block at start, offset off.
func (im *image) metaUpTo(start uint64, off int) []byte {
	var out []byte
	for p := start; p < im.sb.DirTable; {
		var blk []byte
		blk, p = im.metaBlock(p)
		out = append(out, blk...)
		if len(out) > off+3*metaSize {
			break
		}
	}
	return out[off:]
}

func (im *image) walk(p string, ref uint64) {
	in, b := im.inodeAt(ref)
	le := binary.LittleEndian
	var dirStart uint32
	var dirOff uint16
	switch in.Type {
	case typeDir:
		dirStart, in.Nlink, in.Size, dirOff, in.Parent = le.Uint32(b[0:]), le.Uint32(b[4:]), uint64(le.Uint16(b[8:])), le.Uint16(b[10:]), le.Uint32(b[12:])
	case typeExtDir:
		in.Nlink, in.Size, dirStart, in.Parent, dirOff = le.Uint32(b[0:]), uint64(le.Uint32(b[4:])), le.Uint32(b[8:]), le.Uint32(b[12:]), le.Uint16(b[18:])
		idx := b[24:]
		for i := 0; i < int(le.Uint16(b[16:])); i++ {
			n := int(le.Uint32(idx[8:])) + 1
			in.Index = append(in.Index, fmt.Sprintf("%d %s", le.Uint32(idx), idx[12:12+n]))
			idx = idx[12+n:]
		}
	case typeFile:
		in.Start, in.Frag, in.FragOff, in.Size, in.Nlink = uint64(le.Uint32(b[0:])), le.Uint32(b[4:]), le.Uint32(b[8:]), uint64(le.Uint32(b[12:])), 1
		b = b[16:]
	case typeExtFile:
		in.Start, in.Size, in.Nlink, in.Frag, in.FragOff = le.Uint64(b[0:]), le.Uint64(b[8:]), le.Uint32(b[24:]), le.Uint32(b[28:]), le.Uint32(b[32:])
		b = b[40:]
	case typeSymlink:
		in.Nlink = le.Uint32(b[0:])
		in.Size = uint64(le.Uint32(b[4:]))
		in.Target = string(b[8 : 8+in.Size])
	default:
		im.t.Fatalf("%s: inode type %d", p, in.Type)
	}
	if in.Type == typeFile || in.Type == typeExtFile {
		n := in.Size / uint64(im.sb.BlockSize)
		if in.Frag == noFragment && in.Size%uint64(im.sb.BlockSize) != 0 {
			n++
		}
		for i := uint64(0); i < n; i++ {
			in.Blocks = append(in.Blocks, le.Uint32(b[4*i:]))
		}
	}
	im.files[p] = in
	if in.Type != typeDir && in.Type != typeExtDir {
		return
	}
	listing, _ := im.meta(im.sb.DirTable+uint64(dirStart), int(dirOff), int(in.Size)-3)
	for len(listing) > 0 {
		count, blk, base := le.Uint32(listing[0:]), le.Uint32(listing[4:]), le.Uint32(listing[8:])
		listing = listing[12:]
		for i := uint32(0); i <= count; i++ {
			off, delta, typ, nsize := le.Uint16(listing[0:]), int16(le.Uint16(listing[2:])), le.Uint16(listing[4:]), int(le.Uint16(listing[6:]))+1
			name := string(listing[8 : 8+nsize])
			listing = listing[8+nsize:]
			child := name
			if p != "" {
				child = p + "/" + name
			}
			im.walk(child, uint64(blk)<<16|uint64(off))
			if got := im.files[child]; got.Ino != uint32(int64(base)+int64(delta)) || (typ != got.Type && typ+7 != got.Type) {
				im.t.Errorf("%s: directory entry says inode %d type %d, the inode is %d type %d", child, int64(base)+int64(delta), typ, got.Ino, got.Type)
			}
		}
	}
}
