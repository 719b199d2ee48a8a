package btrfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
)

const (
	superOffset  = 0x10000 // primary superblock; the mirrors are never rewritten by this package
	superSize    = 4096
	superMagic   = "_BHRfS_M"
	maxSysArray  = 2048
	maxTreeLevel = 7 // BTRFS_MAX_LEVEL is 8 levels: 0..7

	incompatMetadataUUID   = 1 << 10
	incompatZoned          = 1 << 12
	incompatExtentTreeV2   = 1 << 13
	incompatRaidStripeTree = 1 << 14
)

type superblock struct {
	metadataUUID  [16]byte // what tree block headers carry (== fsid unless METADATA_UUID)
	root          uint64
	chunkRoot     uint64
	logRoot       uint64
	numDevices    uint64
	sectorSize    uint32
	nodeSize      uint32
	rootLevel     uint8
	chunkLevel    uint8
	incompat      uint64
	devID         uint64
	label         string
	sysChunkArray []byte
}

func readSuperblock(dev io.ReaderAt, size int64) (superblock, error) {
	var sb superblock
	if size < superOffset+superSize {
		return sb, fmt.Errorf("%w: device of %d bytes is too small to hold a superblock at 64 KiB", errNotBtrfs, size)
	}
	b := make([]byte, superSize)
	if err := readFull(dev, b, superOffset); err != nil {
		return sb, fmt.Errorf("reading btrfs superblock: %w", err)
	}
	if string(b[0x40:0x48]) != superMagic {
		return sb, fmt.Errorf("%w: no magic %q at offset 64 KiB", errNotBtrfs, superMagic)
	}
	if t := le.Uint16(b[0xc4:]); t != 0 {
		return sb, unsupportedf("checksum type %d (only crc32c is handled)", t)
	}
	if got, want := blockCsum(b), storedCsum(b); got != want {
		return sb, corruptf("superblock checksum mismatch (stored %#08x, computed %#08x)", want, got)
	}
	copy(sb.metadataUUID[:], b[0x20:]) // the fsid
	if bytenr := le.Uint64(b[0x30:]); bytenr != superOffset {
		return sb, corruptf("superblock says it lives at %d, not %d", bytenr, superOffset)
	}
	sb.root = le.Uint64(b[0x50:])
	sb.chunkRoot = le.Uint64(b[0x58:])
	sb.logRoot = le.Uint64(b[0x60:])
	sb.numDevices = le.Uint64(b[0x88:])
	sb.sectorSize = le.Uint32(b[0x90:])
	sb.nodeSize = le.Uint32(b[0x94:])
	sysSize := le.Uint32(b[0xa0:])
	sb.incompat = le.Uint64(b[0xbc:])
	sb.rootLevel, sb.chunkLevel = b[0xc6], b[0xc7]
	sb.devID = le.Uint64(b[0xc9:])
	label := b[0x12b:0x22b]
	if i := bytes.IndexByte(label, 0); i >= 0 {
		label = label[:i]
	}
	sb.label = string(label)
	if sb.incompat&incompatMetadataUUID != 0 {
		copy(sb.metadataUUID[:], b[0x23b:])
	}

	switch {
	case !pow2Between(sb.sectorSize, 4096, 65536):
		return sb, corruptf("sector size %d", sb.sectorSize)
	case !pow2Between(sb.nodeSize, 4096, 65536) || sb.nodeSize < sb.sectorSize:
		return sb, corruptf("node size %d", sb.nodeSize)
	case sysSize > maxSysArray:
		return sb, corruptf("sys_chunk_array size %d > %d", sysSize, maxSysArray)
	case sb.rootLevel > maxTreeLevel || sb.chunkLevel > maxTreeLevel:
		return sb, corruptf("tree level above %d", maxTreeLevel)
	}
	if sb.numDevices != 1 {
		return sb, unsupportedf("%d devices (only single-device filesystems are handled)", sb.numDevices)
	}
	if f := sb.incompat & (incompatExtentTreeV2 | incompatRaidStripeTree); f != 0 {
		return sb, unsupportedf("incompat feature flags %#x (extent tree v2 / raid stripe tree)", f)
	}
	sb.sysChunkArray = append([]byte(nil), b[0x32b:0x32b+sysSize]...)
	return sb, nil
}

func pow2Between(v, lo, hi uint32) bool {
	return v >= lo && v <= hi && bits.OnesCount32(v) == 1
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// csumSize is where a superblock or tree block's checksummed bytes start: the first 32 bytes
// hold the checksum itself.
const csumSize = 32

// blockCsum is the crc32c of a superblock or tree block, as stored in its first 4 bytes.
func blockCsum(b []byte) uint32 { return crc32.Checksum(b[csumSize:], castagnoli) }

func storedCsum(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// setCsum stores the checksum of b and zeroes the rest of the checksum field.
func setCsum(b []byte) {
	clear(b[:csumSize])
	binary.LittleEndian.PutUint32(b, blockCsum(b))
}

// nameHash is btrfs's DIR_ITEM key offset: crc32c seeded with ~1, without the final inversion.
func nameHash(name string) uint64 {
	return uint64(^crc32.Update(1, castagnoli, []byte(name)))
}
