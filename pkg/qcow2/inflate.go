package qcow2

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// A raw-deflate (RFC 1951) decoder for whole compressed clusters: the input is one slice, the
// output one cluster-sized slice that is also the window. Like qemu (inflate until the output
// is full), the decode ends when dst is full, wherever the stream is; a stream that ends before
// is an error.
//
// The structure follows libdeflate's decoder: a 64-bit bit buffer refilled 56 bits at a time
// without branches, table entries that carry the symbol's value, its code length and the bits
// to consume including the extra bits (so a length or distance costs one shift), several
// literals per refill, the next table entry loaded before the match is copied, and word-sized
// match copies. That fast loop runs while the output has room for the longest match and its
// overshoot and the input for the longest symbol sequence, so it checks neither end; the last
// few hundred bytes go through a careful loop.

var (
	errInflateShort   = errors.New("the deflate stream ends before the cluster is full")
	errInflateCorrupt = errors.New("corrupt deflate stream")
)

const (
	litBits  = 10 // primary table index bits for literals/lengths
	distBits = 8  // and for distances
	clBits   = 7  // code-length codes are at most 7 bits: no subtables

	// Table sizes (powers of two, so a masked index needs no bounds check): at least zlib's
	// ENOUGH for the codes they hold (1332 for 286 symbols, 10 root bits and 15-bit codes;
	// 402 for 30 symbols and 8 root bits).
	litSize  = 2048
	distSize = 512
	clSize   = 1 << clBits

	// Table entry: bits 0-5 the bits to consume (code plus extra bits; for a subtable pointer,
	// the primary index bits), bits 8-11 the code length (the extra bits start there; for a
	// subtable pointer, its index bits), bits 12-14 flags, bits 16-30 the value (literal byte,
	// length or distance base, subtable start), bit 31 literal.
	flagBad = 1 << 12
	flagEOB = 1 << 13
	flagSub = 1 << 14
	flagExc = flagBad | flagEOB | flagSub // not a literal, length or distance
	flagLit = 1 << 31

	// Fast loop margins: per iteration at most 2 literals, a 258-byte match and 40 bytes of
	// word overshoot are written, and well under 24 bytes of input are read past pos.
	fastOut = 2 + 258 + 40 + 8
	fastIn  = 32
)

type (
	litTable  [litSize]uint32
	distTable [distSize]uint32
	clTable   [clSize]uint32
)

var (
	lenBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	dstBase  = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	dstExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	clOrder  = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

	// Each symbol's entry without its code length: value, flags and extra bits (in bits 0-5,
	// to which the code length is added).
	litSyms  [288]uint32
	distSyms [32]uint32
	clSyms   [19]uint32

	fixedLit  litTable
	fixedDist distTable
)

func init() {
	for s := range litSyms {
		switch {
		case s < 256:
			litSyms[s] = flagLit | uint32(s)<<16
		case s == 256:
			litSyms[s] = flagEOB
		case s < 286:
			litSyms[s] = uint32(lenBase[s-257])<<16 | uint32(lenExtra[s-257])
		default: // 286, 287: never valid
			litSyms[s] = flagBad | flagEOB
		}
	}
	for s := range distSyms {
		if s < 30 {
			distSyms[s] = uint32(dstBase[s])<<16 | uint32(dstExtra[s])
		} else {
			distSyms[s] = flagBad
		}
	}
	for s := range clSyms {
		clSyms[s] = uint32(s) << 16
	}
	var l [288]uint8
	for i := range l {
		switch {
		case i < 144:
			l[i] = 8
		case i < 256:
			l[i] = 9
		case i < 280:
			l[i] = 7
		default:
			l[i] = 8
		}
	}
	var sc tableScratch
	if err := sc.build(fixedLit[:], l[:], litBits, litSyms[:], flagBad|flagEOB); err != nil {
		panic(err)
	}
	var d [32]uint8 // 30 and 31 complete the code; decoding them fails
	for i := range d {
		d[i] = 5
	}
	if err := sc.build(fixedDist[:], d[:], distBits, distSyms[:], flagBad); err != nil {
		panic(err)
	}
}

// tableScratch is build's working memory (no allocation per dynamic block).
type tableScratch struct {
	subBits  [1 << litBits]uint8
	subStart [1 << litBits]uint16
	codes    [320]uint16
}

// build fills t with a two-level canonical Huffman decoding table for the code lengths l:
// entries indexed by the next `bits` input bits (reversed codes, as deflate sends them); longer
// codes go through a subtable after the primary entries. syms holds each symbol's entry
// without its length, bad the entry of codes no symbol has. As zlib, an over-subscribed or
// incomplete code is an error, except a code of one symbol (length 1) or of none.
func (sc *tableScratch) build(t []uint32, l []uint8, bits uint, syms []uint32, bad uint32) error {
	var count [16]int
	maxLen := uint(0)
	for _, n := range l {
		count[n&15]++
		maxLen = max(maxLen, uint(n))
	}
	count[0] = 0
	left := 1
	for n := 1; n < 16; n++ {
		left = left<<1 - count[n]
		if left < 0 {
			return errInflateCorrupt
		}
	}
	if left > 0 && maxLen > 1 {
		return errInflateCorrupt
	}
	size := 1 << bits
	if left > 0 { // incomplete: the entries no code reaches fail
		for i := range t[:size] {
			t[i] = bad
		}
	}
	var next [16]int
	code := 0
	for n := 1; n < 16; n++ {
		code = (code + count[n-1]) << 1
		next[n] = code
	}
	codes := sc.codes[:len(l)]
	for sym, n := range l {
		if n != 0 {
			codes[sym] = bits16(next[n&15], uint(n))
			next[n&15]++
		}
	}
	// Subtables: for each primary index whose codes are longer than bits, the longest length
	// below it decides the subtable's index bits. A complete code fills every entry.
	end := size
	if maxLen > bits {
		subBits := sc.subBits[:size]
		clear(subBits)
		for sym, n := range l {
			if uint(n) > bits {
				p := int(codes[sym]) & (size - 1)
				subBits[p] = max(subBits[p], uint8(uint(n)-bits))
			}
		}
		for p, b := range subBits { // in index order: the layout is deterministic
			if b != 0 {
				if end+1<<b > len(t) {
					return errInflateCorrupt
				}
				sc.subStart[p] = uint16(end)
				t[p] = flagSub | uint32(end)<<16 | uint32(b)<<8 | uint32(bits)
				end += 1 << b
			}
		}
	}
	for sym, n := range l {
		if n == 0 {
			continue
		}
		c := int(codes[sym])
		if uint(n) <= bits {
			e := syms[sym] + uint32(n) | uint32(n)<<8
			for i := c; i < size; i += 1 << n {
				t[i] = e
			}
			continue
		}
		k := uint(n) - bits
		e := syms[sym] + uint32(k) | uint32(k)<<8
		p := c & (size - 1)
		sub := t[sc.subStart[p]:][:1<<sc.subBits[p]]
		for i := c >> bits; i < len(sub); i += 1 << k {
			sub[i] = e
		}
	}
	return nil
}

// bits16 returns the n-bit code c bit-reversed (deflate sends codes most significant bit first).
func bits16(c int, n uint) uint16 { return bits.Reverse16(uint16(c)) >> (16 - n) }

// inflater holds the tables of dynamic blocks, reused across clusters.
type inflater struct {
	lit  litTable
	dist distTable
	cl   clTable
	lens [320]uint8
	sc   tableScratch
}

type bitReader struct {
	src   []byte
	pos   int
	bits  uint64
	nbits uint
	over  int // bytes of zeros read past the end
}

// refill tops the bit buffer up to at least 57 bits, with zeros past the end of the input.
func (b *bitReader) refill() {
	if b.pos+8 <= len(b.src) {
		b.bits |= binary.LittleEndian.Uint64(b.src[b.pos:]) << (b.nbits & 63)
		b.pos += int(63-b.nbits) >> 3
		b.nbits |= 56
		return
	}
	for b.nbits <= 56 {
		if b.pos < len(b.src) {
			b.bits |= uint64(b.src[b.pos]) << (b.nbits & 63)
			b.pos++
		} else {
			b.over++
		}
		b.nbits += 8
	}
}

func (b *bitReader) take(n uint) uint32 {
	v := uint32(b.bits & (1<<n - 1))
	b.bits >>= n
	b.nbits -= n
	return v
}

// overrun reports whether more bits were consumed than the input holds.
func (b *bitReader) overrun() bool { return b.over*8 > int(b.nbits) }

// inflateCluster decodes src into all of dst.
func (f *inflater) inflateCluster(dst, src []byte) error {
	b := bitReader{src: src}
	op := 0
	for {
		b.refill()
		final := b.take(1)
		typ := b.take(2)
		switch typ {
		case 0: // stored: skip to the byte boundary, LEN and NLEN
			b.take(b.nbits & 7)
			b.refill()
			n, nn := b.take(16), b.take(16)
			if n != ^nn&0xffff || b.overrun() {
				return errInflateCorrupt
			}
			// The bit buffer holds whole bytes now: hand them back, then copy.
			// (zeros the refill added past the end count as positions too)
			pos := b.pos + b.over - int(b.nbits/8)
			b.bits, b.nbits, b.over = 0, 0, 0
			if pos+int(n) > len(src) {
				return errInflateShort
			}
			k := copy(dst[op:], src[pos:pos+int(n)])
			op += k
			b.pos = pos + int(n)
			if op == len(dst) {
				return nil
			}
		case 1:
			done, err := codes(&b, dst, &op, &fixedLit, &fixedDist)
			if err != nil || done {
				return err
			}
		case 2:
			if err := f.dynamic(&b); err != nil {
				return err
			}
			done, err := codes(&b, dst, &op, &f.lit, &f.dist)
			if err != nil || done {
				return err
			}
		default:
			return errInflateCorrupt
		}
		if final == 1 {
			return errInflateShort
		}
	}
}

// dynamic reads a dynamic block's code lengths and builds f.lit and f.dist.
func (f *inflater) dynamic(b *bitReader) error {
	b.refill()
	hlit := int(b.take(5)) + 257
	hdist := int(b.take(5)) + 1
	hclen := int(b.take(4)) + 4
	if hlit > 286 || hdist > 30 {
		return errInflateCorrupt
	}
	var cl [19]uint8
	for i := 0; i < hclen; i++ {
		if b.nbits < 3 {
			b.refill()
		}
		cl[clOrder[i]] = uint8(b.take(3))
	}
	if err := f.sc.build(f.cl[:], cl[:], clBits, clSyms[:], flagBad); err != nil {
		return err
	}
	lens := f.lens[:hlit+hdist]
	for i := 0; i < len(lens); {
		b.refill()
		e := f.cl[b.bits&(clSize-1)]
		if e&flagBad != 0 {
			return errInflateCorrupt
		}
		b.bits >>= e & 63
		b.nbits -= uint(e & 63)
		sym := e >> 16
		if sym < 16 {
			lens[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16:
			if i == 0 {
				return errInflateCorrupt
			}
			rep, val = 3+int(b.take(2)), lens[i-1]
		case 17:
			rep = 3 + int(b.take(3))
		default:
			rep = 11 + int(b.take(7))
		}
		if i+rep > len(lens) {
			return errInflateCorrupt
		}
		for k := 0; k < rep; k++ {
			lens[i+k] = val
		}
		i += rep
	}
	if b.overrun() || lens[256] == 0 {
		return errInflateCorrupt
	}
	if err := f.sc.build(f.lit[:], lens[:hlit], litBits, litSyms[:], flagBad|flagEOB); err != nil {
		return err
	}
	return f.sc.build(f.dist[:], lens[hlit:], distBits, distSyms[:], flagBad)
}

// codes decodes one Huffman block into dst from *op. done: dst is full. The bit buffer lives
// in locals here (the hot loop); it is written back to b on return.
func codes(b *bitReader, dst []byte, op *int, lit *litTable, dist *distTable) (done bool, err error) {
	src := b.src
	bits, nbits, pos := b.bits, b.nbits, b.pos
	o := *op
	if b.over != 0 || pos+fastIn > len(src) || o+fastOut > len(dst) {
		goto slow
	}
	{
		// The fast loop. At the top of each iteration the bit buffer holds at least 56 bits and
		// e is the primary entry of the next symbol (loaded before the refill, which only adds
		// bits above it). Consumption per iteration stays within the 56: at most 3 primary
		// lookups of <= 15 bits (code and extra bits), or 2 and a subtable's 10, before the
		// distance, which refills first.
		inEnd, outEnd := len(src)-fastIn, len(dst)-fastOut
		bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
		pos += int(63-nbits) >> 3
		nbits |= 56
		e := lit[bits&(1<<litBits-1)]
		for pos <= inEnd && o <= outEnd {
			saved := bits
			bits >>= e & 63
			nbits -= uint(e & 63)
			if e&flagLit != 0 {
				// up to two more literals before the refill
				dst[o] = byte(e >> 16)
				o++
				e = lit[bits&(1<<litBits-1)]
				saved = bits
				bits >>= e & 63
				nbits -= uint(e & 63)
				if e&flagLit != 0 {
					dst[o] = byte(e >> 16)
					o++
					e = lit[bits&(1<<litBits-1)]
					saved = bits
					bits >>= e & 63
					nbits -= uint(e & 63)
					if e&flagLit != 0 {
						dst[o] = byte(e >> 16)
						o++
						e = lit[bits&(1<<litBits-1)]
						bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
						pos += int(63-nbits) >> 3
						nbits |= 56
						continue
					}
				}
			}
			if e&flagExc != 0 {
				if e&flagSub == 0 { // end of block, or a code no symbol has
					if e&flagBad != 0 {
						err = errInflateCorrupt
					}
					goto out
				}
				e = lit[(e>>16+uint32(bits)&(1<<(e>>8&15)-1))&(litSize-1)]
				saved = bits
				bits >>= e & 63
				nbits -= uint(e & 63)
				if e&flagLit != 0 {
					dst[o] = byte(e >> 16)
					o++
					e = lit[bits&(1<<litBits-1)]
					bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
					pos += int(63-nbits) >> 3
					nbits |= 56
					continue
				}
				if e&flagExc != 0 {
					if e&flagBad != 0 {
						err = errInflateCorrupt
					}
					goto out
				}
			}
			// A length: its extra bits were consumed with the code.
			length := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&15))
			d := dist[bits&(1<<distBits-1)]
			bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
			pos += int(63-nbits) >> 3
			nbits |= 56
			if d&flagExc != 0 {
				if d&flagSub == 0 {
					err = errInflateCorrupt
					goto out
				}
				bits >>= distBits
				nbits -= distBits
				d = dist[(d>>16+uint32(bits)&(1<<(d>>8&15)-1))&(distSize-1)]
				if d&flagExc != 0 {
					err = errInflateCorrupt
					goto out
				}
			}
			saved = bits
			bits >>= d & 63
			nbits -= uint(d & 63)
			distance := int(d>>16) + int(saved&(1<<(d&63)-1)>>(d>>8&15))
			if distance > o {
				err = errInflateCorrupt
				goto out
			}
			// Next symbol's entry and the refill before the copy, which does not depend on them.
			e = lit[bits&(1<<litBits-1)]
			bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
			pos += int(63-nbits) >> 3
			nbits |= 56
			from, end := o-distance, o+length
			switch {
			case distance >= 8:
				// whole words, overshooting into bytes written later anyway; each word reads
				// only bytes written before it
				w, s := (*[40]byte)(dst[o:]), (*[40]byte)(dst[from:])
				binary.LittleEndian.PutUint64(w[0:], binary.LittleEndian.Uint64(s[0:]))
				binary.LittleEndian.PutUint64(w[8:], binary.LittleEndian.Uint64(s[8:]))
				binary.LittleEndian.PutUint64(w[16:], binary.LittleEndian.Uint64(s[16:]))
				binary.LittleEndian.PutUint64(w[24:], binary.LittleEndian.Uint64(s[24:]))
				binary.LittleEndian.PutUint64(w[32:], binary.LittleEndian.Uint64(s[32:]))
				for k := 40; k < length; k += 8 {
					binary.LittleEndian.PutUint64(dst[o+k:], binary.LittleEndian.Uint64(dst[from+k:]))
				}
			case distance == 1: // a run of one byte
				v := uint64(dst[from]) * 0x0101010101010101
				w := (*[40]byte)(dst[o:])
				binary.LittleEndian.PutUint64(w[0:], v)
				binary.LittleEndian.PutUint64(w[8:], v)
				binary.LittleEndian.PutUint64(w[16:], v)
				binary.LittleEndian.PutUint64(w[24:], v)
				binary.LittleEndian.PutUint64(w[32:], v)
				for k := o + 40; k < end; k += 8 {
					binary.LittleEndian.PutUint64(dst[k:], v)
				}
			default: // 2-7: words stepping by the distance, so each reads what is written
				for k := o; k < end; k += distance {
					binary.LittleEndian.PutUint64(dst[k:], binary.LittleEndian.Uint64(dst[k-distance:]))
				}
			}
			o = end
		}
		// e, loaded but not consumed, is looked up again below.
	}
slow:
	for {
		if pos+8 <= len(src) {
			bits |= binary.LittleEndian.Uint64(src[pos:]) << (nbits & 63)
			pos += int(63-nbits) >> 3
			nbits |= 56
		} else {
			for nbits <= 56 {
				if pos < len(src) {
					bits |= uint64(src[pos]) << (nbits & 63)
					pos++
				} else {
					b.over++
				}
				nbits += 8
			}
		}
		e := lit[bits&(1<<litBits-1)]
		if e&flagSub != 0 {
			bits >>= litBits
			nbits -= litBits
			e = lit[(e>>16+uint32(bits)&(1<<(e>>8&15)-1))&(litSize-1)]
		}
		saved := bits
		bits >>= e & 63
		nbits -= uint(e & 63)
		if e&flagLit != 0 {
			dst[o] = byte(e >> 16)
			o++
			if o == len(dst) {
				done = true
				goto out
			}
			continue
		}
		if e&flagExc != 0 {
			if e&flagBad != 0 {
				err = errInflateCorrupt
			}
			goto out
		}
		length := int(e>>16) + int(saved&(1<<(e&63)-1)>>(e>>8&15))
		// of the 56 bits, a length took 20 at most: 36 are left for the distance (28 at most)
		d := dist[bits&(1<<distBits-1)]
		if d&flagSub != 0 {
			bits >>= distBits
			nbits -= distBits
			d = dist[(d>>16+uint32(bits)&(1<<(d>>8&15)-1))&(distSize-1)]
		}
		if d&flagExc != 0 {
			err = errInflateCorrupt
			goto out
		}
		saved = bits
		bits >>= d & 63
		nbits -= uint(d & 63)
		distance := int(d>>16) + int(saved&(1<<(d&63)-1)>>(d>>8&15))
		if distance > o {
			err = errInflateCorrupt
			goto out
		}
		if b.over*8 > int(nbits) {
			err = errInflateShort
			goto out
		}
		end := min(o+length, len(dst)) // as qemu: a full cluster ends the decode mid-match
		// doubling copy: the source grows with what is written (period distance)
		start := o - distance
		for o < end {
			o += copy(dst[o:end], dst[start:o])
		}
		if o == len(dst) {
			done = true
			goto out
		}
	}
out:
	b.bits, b.nbits, b.pos = bits, nbits, pos
	*op = o
	if err == nil && b.overrun() {
		err = errInflateShort
	}
	return done, err
}
