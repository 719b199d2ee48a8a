package sysext

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// squashfs 4.0 superblock (96 bytes, little endian), the fields this package checks.
const (
	superblockSize = 96
	squashfsMagic  = 0x73717368 // "hsqs"
)

type superblock struct {
	Inodes      uint32
	MkfsTime    time.Time
	BlockSize   uint32
	Compression string
	BytesUsed   uint64
	tables      [6]uint64 // id, xattr, inode, directory, fragment, export table starts
}

var compressionNames = map[uint16]string{1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}

// readSuperblock checks that r holds a whole squashfs 4.0 image: the magic, a sane block
// size, and bytes_used and every table start within the file (a truncated download fails here
// with the sizes named rather than later inside the reader).
func readSuperblock(r io.ReaderAt, size int64) (*superblock, error) {
	if size < superblockSize {
		return nil, errs.Invalidf("not a squashfs image: %d bytes is smaller than a superblock (is the file empty or truncated?)", size)
	}
	b := make([]byte, superblockSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("reading the squashfs superblock: %w", err)
	}
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != squashfsMagic {
		return nil, errs.Invalidf("not a squashfs image (magic %#08x, want hsqs); a sysext must be a squashfs file such as systemd-sysext and Flatcar's bakery make", m)
	}
	if major, minor := le.Uint16(b[28:]), le.Uint16(b[30:]); major != 4 || minor != 0 {
		return nil, fmt.Errorf("squashfs version %d.%d is not supported by Linux (need 4.0)", major, minor)
	}
	sb := &superblock{
		Inodes:    le.Uint32(b[4:]),
		MkfsTime:  time.Unix(int64(le.Uint32(b[8:])), 0).UTC(),
		BlockSize: le.Uint32(b[12:]),
		BytesUsed: le.Uint64(b[40:]),
	}
	if bs, log := sb.BlockSize, le.Uint16(b[22:]); bs < 4096 || bs > 1<<20 || bits.OnesCount32(bs) != 1 || 1<<log != bs {
		return nil, fmt.Errorf("corrupt squashfs superblock: block size %d (log %d) is invalid", bs, log)
	}
	c := le.Uint16(b[20:])
	name, ok := compressionNames[c]
	if !ok {
		return nil, fmt.Errorf("corrupt squashfs superblock: unknown compression id %d", c)
	}
	sb.Compression = name
	if sb.BytesUsed > uint64(size) {
		return nil, fmt.Errorf("truncated squashfs: the superblock says the image is %d bytes, the file has only %d (an interrupted download or copy?)", sb.BytesUsed, size)
	}
	names := []string{"id", "xattr", "inode", "directory", "fragment", "export"}
	for i, off := range []int{48, 56, 64, 72, 80, 88} {
		sb.tables[i] = le.Uint64(b[off:])
		// xattr, fragment and export tables are optional: 0xffff... means absent.
		if sb.tables[i] != ^uint64(0) && sb.tables[i] >= sb.BytesUsed {
			return nil, fmt.Errorf("corrupt squashfs superblock: the %s table starts at %d, beyond the image end %d", names[i], sb.tables[i], sb.BytesUsed)
		}
	}
	return sb, nil
}
