package bzip2

import "encoding/binary"

// bitReader reads MSB-first bits from an in-memory slice. Reads past the end
// yield zero bits; overrun reports whether any of them were consumed, which
// the block decoder turns into errNeedMore (the block continues in data it
// was not given) instead of decoding garbage.
type bitReader struct {
	data []byte
	pos  int    // next byte of data to load (may pass len(data): virtual zeros)
	bits uint64 // valid bits are left-aligned; bits past n are future input
	n    uint   // number of valid bits in bits
}

func newBitReader(data []byte, skip uint) bitReader {
	br := bitReader{data: data}
	br.refill()
	br.consume(skip)
	return br
}

// refill tops the buffer up to at least 56 valid bits.
func (br *bitReader) refill() {
	if br.pos+8 <= len(br.data) {
		v := binary.BigEndian.Uint64(br.data[br.pos:])
		br.bits |= v >> br.n
		br.pos += int(63-br.n) >> 3
		br.n |= 56
		return
	}
	for br.n <= 56 {
		var b byte
		if br.pos < len(br.data) {
			b = br.data[br.pos]
		}
		br.pos++
		br.bits |= uint64(b) << (56 - br.n)
		br.n += 8
	}
}

func (br *bitReader) consume(k uint) {
	br.bits <<= k
	br.n -= k
}

// read returns the next k (<= 32) bits.
func (br *bitReader) read(k uint) uint32 {
	if br.n < k {
		br.refill()
	}
	v := uint32(br.bits >> (64 - k))
	br.consume(k)
	return v
}

func (br *bitReader) bit() bool { return br.read(1) == 1 }

// offset is the number of bits consumed so far.
func (br *bitReader) offset() int64 { return int64(br.pos)*8 - int64(br.n) }

// overrun reports whether bits past the end of data were consumed.
func (br *bitReader) overrun() bool { return br.offset() > int64(len(br.data))*8 }
