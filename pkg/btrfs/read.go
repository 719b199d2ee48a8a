package btrfs

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

const (
	// maxFileSize bounds what ReadFile allocates; OEM files are far smaller.
	maxFileSize = 1 << 30
	// maxCompressed is btrfs's largest compressed extent (BTRFS_MAX_COMPRESSED, 128 KiB).
	maxCompressed = 128 << 10
)

// readData assembles a file from its EXTENT_DATA items; gaps (holes, NO_HOLES) read as zeros.
func (fs *FS) readData(in inode) ([]byte, error) {
	size := in.item.size()
	if size > maxFileSize {
		return nil, unsupportedf("file of %d bytes is larger than %d", size, maxFileSize)
	}
	out := make([]byte, 0, min(size, 1<<20))
	err := fs.walk(fs.fsTree, key{in.ino, typeExtentData, 0}, key{in.ino, typeExtentData, maxU64}, func(b *block, slot int) (bool, error) {
		off := b.keys[slot].offset
		if off >= size {
			return false, nil
		}
		e, err := parseFileExtent(b.data(slot))
		if err != nil {
			return false, err
		}
		piece, err := fs.extentBytes(e, size-off)
		if err != nil {
			return false, fmt.Errorf("extent at file offset %d: %w", off, err)
		}
		if uint64(len(out)) < off {
			out = append(out, make([]byte, off-uint64(len(out)))...)
		}
		n := copy(out[off:], piece)
		out = append(out, piece[n:]...)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if uint64(len(out)) < size {
		out = append(out, make([]byte, size-uint64(len(out)))...)
	}
	return out[:size], nil
}

// extentBytes returns the file bytes one extent holds, at most limit of them.
func (fs *FS) extentBytes(e fileExtent, limit uint64) ([]byte, error) {
	if e.encoded {
		return nil, unsupportedf("encrypted or otherwise encoded extent")
	}
	if e.typ == extentInline {
		switch e.compression {
		case compressNone:
			return e.inline[:min(uint64(len(e.inline)), limit)], nil
		case compressZlib:
			return inflate(e.inline, min(e.ramBytes, limit))
		case compressZstd:
			return unzstd(e.inline, min(e.ramBytes, limit))
		}
		return nil, unsupportedf("inline extent compression type %d (zlib and zstd are handled, not lzo)", e.compression)
	}
	n := min(e.numBytes, limit)
	if e.typ == extentPrealloc || e.diskBytenr == 0 || n == 0 {
		return make([]byte, n), nil
	}
	switch e.compression {
	case compressNone:
		if n > maxFileSize || e.offset > maxU64-e.diskBytenr {
			return nil, corruptf("extent of %d bytes at disk %d+%d", n, e.diskBytenr, e.offset)
		}
		return fs.readLogical(e.diskBytenr+e.offset, int(n))
	case compressZlib, compressZstd:
		if e.diskNumBytes > maxCompressed || e.ramBytes > maxCompressed || e.diskNumBytes == 0 {
			return nil, corruptf("compressed extent of %d bytes on disk, %d in memory", e.diskNumBytes, e.ramBytes)
		}
		raw, err := fs.readLogical(e.diskBytenr, int(e.diskNumBytes))
		if err != nil {
			return nil, err
		}
		decode := inflate
		if e.compression == compressZstd {
			decode = unzstd
		}
		// Decode only what is used: the last extent of a file has fewer bytes than ram_bytes
		// (rounded up to a sector), and zstd would read on into the zero padding.
		plain, err := decode(raw, min(e.ramBytes, e.offset+n))
		if err != nil {
			return nil, err
		}
		if e.offset > uint64(len(plain)) {
			return nil, corruptf("extent offset %d beyond its %d decompressed bytes", e.offset, len(plain))
		}
		return plain[e.offset:min(uint64(len(plain)), e.offset+n)], nil
	}
	return nil, unsupportedf("extent compression type %d (zlib and zstd are handled, not lzo)", e.compression)
}

// inflate decompresses a zlib stream, keeping at most limit bytes of output.
func inflate(b []byte, limit uint64) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, corruptf("zlib extent: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(min(limit, maxCompressed))))
	if err != nil {
		return nil, corruptf("zlib extent: %v", err)
	}
	return out, nil
}

// unzstd decompresses btrfs's zstd data (one frame; the on-disk sector padding after it is
// zeros), keeping at most limit bytes of output.
func unzstd(b []byte, limit uint64) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxCompressed))
	if err != nil {
		return nil, corruptf("zstd extent: %v", err)
	}
	defer d.Close()
	out, err := io.ReadAll(io.LimitReader(d, int64(min(limit, maxCompressed))))
	if err != nil && len(out) < int(min(limit, maxCompressed)) {
		return nil, corruptf("zstd extent: %v", err)
	}
	return out, nil
}
