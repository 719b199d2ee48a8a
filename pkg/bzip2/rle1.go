package bzip2

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
)

// bzip2's first stage writes four equal bytes followed by a count (0..255)
// of further copies. A block of zeros thus expands 51-fold (46 MB from a
// 900 kB block), so blocks are not expanded in the workers: they record
// where the runs are (and compute the CRC of the expanded bytes), and the
// consumer expands into the caller's buffer.

// rle1Run says that count copies of b follow pre[:at], and pre[at] (the
// count byte) is skipped.
type rle1Run struct {
	at    int32
	b     byte
	count uint8
}

// blockOutput is a decoded block: pre with its runs, and a read position.
type blockOutput struct {
	pre  []byte
	runs []rle1Run
	pos  int // next byte of pre to copy
	ri   int // next run
	fill int // copies of fillByte still to emit
	fb   byte
}

// scanRLE1 finds the runs in pre and computes the block CRC of the
// expanded bytes.
func scanRLE1(pre []byte) (blockOutput, uint32) {
	o := blockOutput{pre: pre}
	var c crcState
	lit := 0 // start of the literal bytes not yet hashed
	k := 0
	for k+4 < len(pre) {
		b := pre[k]
		if b != pre[k+1] {
			k++
			continue
		}
		if b != pre[k+2] || b != pre[k+3] {
			k++
			continue
		}
		count := pre[k+4]
		c.update(pre[lit : k+4])
		c.updateRun(b, int(count))
		o.runs = append(o.runs, rle1Run{at: int32(k + 4), b: b, count: count})
		k += 5
		lit = k
	}
	c.update(pre[lit:])
	return o, c.sum()
}

// read expands the block into p and returns the number of bytes written.
func (o *blockOutput) read(p []byte) int {
	n := 0
	for n < len(p) {
		if o.fill > 0 {
			k := min(o.fill, len(p)-n)
			fill := p[n : n+k]
			for i := range fill {
				fill[i] = o.fb
			}
			n += k
			o.fill -= k
			continue
		}
		end := len(o.pre)
		if o.ri < len(o.runs) {
			end = int(o.runs[o.ri].at)
		}
		if o.pos < end {
			k := copy(p[n:], o.pre[o.pos:end])
			n += k
			o.pos += k
			continue
		}
		if o.ri == len(o.runs) {
			break
		}
		r := o.runs[o.ri]
		o.ri++
		o.fill, o.fb, o.pos = int(r.count), r.b, int(r.at)+1
	}
	return n
}

// done reports whether read has nothing more to give.
func (o *blockOutput) done() bool {
	return o.fill == 0 && o.ri == len(o.runs) && o.pos >= len(o.pre)
}

// crcState computes bzip2's CRC: the CRC-32 polynomial of IEEE 802.3
// processed MSB-first, while Go's hash/crc32 (hardware accelerated) is
// LSB-first. The MSB-first CRC of some bytes equals the bit-reversed
// LSB-first CRC of the same bytes with their bits reversed, so updates
// reverse bytes in chunks and let crc32 do the rest.
type crcState struct {
	c   uint32 // LSB-first CRC so far, in crc32.Update's convention
	buf [4096]byte
}

func (s *crcState) update(p []byte) {
	for len(p) > 0 {
		n := copy(s.buf[:], p)
		p = p[n:]
		reverseBytesBits(s.buf[:n])
		s.c = crc32.Update(s.c, crc32.IEEETable, s.buf[:n])
	}
}

func (s *crcState) updateRun(b byte, count int) {
	r := bits.Reverse8(b)
	run := s.buf[:count]
	for i := range run {
		run[i] = r
	}
	s.c = crc32.Update(s.c, crc32.IEEETable, run)
}

func (s *crcState) sum() uint32 { return bits.Reverse32(s.c) }

// reverseBytesBits reverses the bit order within each byte of p.
func reverseBytesBits(p []byte) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x := binaryLE.Uint64(p[i:])
		x = (x>>1)&0x5555555555555555 | (x&0x5555555555555555)<<1
		x = (x>>2)&0x3333333333333333 | (x&0x3333333333333333)<<2
		x = (x>>4)&0x0f0f0f0f0f0f0f0f | (x&0x0f0f0f0f0f0f0f0f)<<4
		binaryLE.PutUint64(p[i:], x)
	}
	for ; i < len(p); i++ {
		p[i] = bits.Reverse8(p[i])
	}
}

// streamCRC folds a block CRC into the combined CRC of a stream.
func streamCRC(combined, block uint32) uint32 {
	return bits.RotateLeft32(combined, 1) ^ block
}

var binaryLE = binary.LittleEndian
