package bzip2

import (
	"hash/crc32"
	"math/bits"
)

// bzip2 uses the CRC-32 polynomial of IEEE 802.3 MSB-first, while Go's
// hash/crc32 (hardware accelerated) processes it LSB-first. The MSB-first
// CRC of data equals the bit-reversed LSB-first CRC of data with every byte
// bit-reversed, so blockCRC reverses bytes in chunks and lets crc32 do the
// rest.
func blockCRC(data []byte) uint32 {
	var buf [4096]byte
	var c uint32
	for len(data) > 0 {
		n := copy(buf[:], data)
		data = data[n:]
		reverseBytesBits(buf[:n])
		c = crc32.Update(c, crc32.IEEETable, buf[:n])
	}
	return bits.Reverse32(c)
}

// reverseBytesBits reverses the bit order within each byte of p.
func reverseBytesBits(p []byte) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x := uint64(p[i]) | uint64(p[i+1])<<8 | uint64(p[i+2])<<16 | uint64(p[i+3])<<24 |
			uint64(p[i+4])<<32 | uint64(p[i+5])<<40 | uint64(p[i+6])<<48 | uint64(p[i+7])<<56
		x = (x>>1)&0x5555555555555555 | (x&0x5555555555555555)<<1
		x = (x>>2)&0x3333333333333333 | (x&0x3333333333333333)<<2
		x = (x>>4)&0x0f0f0f0f0f0f0f0f | (x&0x0f0f0f0f0f0f0f0f)<<4
		p[i], p[i+1], p[i+2], p[i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		p[i+4], p[i+5], p[i+6], p[i+7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
	}
	for ; i < len(p); i++ {
		p[i] = bits.Reverse8(p[i])
	}
}

// streamCRC folds a block CRC into the combined CRC of a stream.
func streamCRC(combined, block uint32) uint32 {
	return bits.RotateLeft32(combined, 1) ^ block
}
