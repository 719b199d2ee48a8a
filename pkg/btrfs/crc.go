package btrfs

import (
	"encoding/binary"
	"hash/crc32"
)

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
