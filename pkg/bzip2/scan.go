package bzip2

import "encoding/binary"

// The block and end-of-stream magics are 48-bit patterns at any bit offset.
// Whatever its shift s (0..7), a magic starting in byte k fully determines
// bytes k+1..k+5. Exactly one of k+1, k+2 is even, so testing the byte pair
// at every even offset j against the pairs (k+1,k+2) and (k+2,k+3) of all
// shifts finds every candidate once, at one table lookup per two bytes.
var pairTable = func() (t [1 << 16 / 64]uint64) {
	for _, magic := range []uint64{blockMagic, eosMagic} {
		for s := 0; s < 8; s++ {
			x := magic << (8 - s) // the 7 bytes k..k+6, MSB first
			for first := 1; first <= 2; first++ {
				v := uint16(x >> (8 * (5 - first)))
				t[v/64] |= 1 << (v % 64)
			}
		}
	}
	return t
}()

// candidate is a magic found in the input.
type candidate struct {
	bit int64 // absolute bit offset of its first bit
	eos bool  // end-of-stream magic rather than block magic
}

// scanMagics reports, in increasing order, the magics starting in bytes
// [from, to) of buf, where buf[0] is at absolute byte offset base. Bytes past len(buf) read as zero, so a magic is
// reported only if its 48 bits lie within buf.
func scanMagics(buf []byte, base, from, to int64, emit func(candidate)) {
	// j walks even absolute offsets; the magic starts at k = j-2 or j-1.
	j := from + 1
	if j&1 != 0 {
		j++
	}
	end := base + int64(len(buf)) - 1 // need bytes j and j+1
	for ; j < end && j-2 < to; j += 2 {
		i := j - base
		v := binary.BigEndian.Uint16(buf[i:])
		if pairTable[v/64]&(1<<(v%64)) == 0 {
			continue
		}
		for k := j - 2; k < j; k++ {
			if k < from || k >= to {
				continue
			}
			w := load56(buf, k-base)
			for s := 0; s < 8; s++ {
				m := w >> (8 - s) & (1<<48 - 1)
				if m != blockMagic && m != eosMagic {
					continue
				}
				bit := k*8 + int64(s)
				if bit+48 > (base+int64(len(buf)))*8 {
					continue
				}
				emit(candidate{bit: bit, eos: m == eosMagic})
			}
		}
	}
}

// load56 returns bytes i..i+6 of buf as a 56-bit big-endian value, zero past the end.
func load56(buf []byte, i int64) uint64 {
	var w uint64
	for k := i; k < i+7; k++ {
		w <<= 8
		if k < int64(len(buf)) {
			w |= uint64(buf[k])
		}
	}
	return w
}
