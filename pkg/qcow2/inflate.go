package qcow2

import (
	"encoding/binary"
	"errors"
)

// A raw-deflate (RFC 1951) decoder for whole compressed clusters: the input is one slice, the
// output one cluster-sized slice that is also the window. Decoding straight into the cluster
// with a 64-bit bit buffer and two-level tables needs about half the CPU of a streaming
// io.Reader decoder (klauspost/compress/flate), which copies through its own window and
// refills a byte at a time. Like qemu (inflate until the output is full), the decode ends when
// dst is full, wherever the stream is; a stream that ends before is an error.

var (
	errInflateShort   = errors.New("the deflate stream ends before the cluster is full")
	errInflateCorrupt = errors.New("corrupt deflate stream")
)

const (
	litBits  = 10 // primary table index bits for literals/lengths
	distBits = 8  // and for distances

	// table entry: bits 0-7 bits to consume, bits 8-11 kind, bits 12-15 extra bits, 16-31 value
	kindLit  = 0 << 8
	kindLen  = 1 << 8
	kindEOB  = 2 << 8
	kindSub  = 3 << 8 // value: subtable start, extra field: subtable index bits
	kindBad  = 4 << 8
	kindMask = 0xf << 8
)

var (
	lenBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	dstBase  = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	dstExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	clOrder  = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

	fixedLit, fixedDist []uint32
)

func init() {
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
	fixedLit, _ = buildTable(nil, l[:], litBits, litEntry)
	var d [32]uint8 // 30 and 31 complete the code; decoding them fails
	for i := range d {
		d[i] = 5
	}
	fixedDist, _ = buildTable(nil, d[:], distBits, distEntry)
}

func litEntry(sym int) (uint32, bool) {
	switch {
	case sym < 256:
		return kindLit | uint32(sym)<<16, true
	case sym == 256:
		return kindEOB, true
	case sym < 286:
		return kindLen | uint32(lenExtra[sym-257])<<12 | uint32(lenBase[sym-257])<<16, true
	}
	return 0, false // 286, 287: never valid
}

func distEntry(sym int) (uint32, bool) {
	if sym < 30 {
		return uint32(dstExtra[sym])<<12 | uint32(dstBase[sym])<<16, true
	}
	return 0, false
}

func clEntry(sym int) (uint32, bool) { return uint32(sym) << 16, true }

// tableScratch is buildTable's working memory (no allocation per dynamic block).
type tableScratch struct {
	subBits  [1 << litBits]uint8
	subStart [1 << litBits]uint16
	codes    [320]uint16
}

// buildTable makes a two-level canonical Huffman decoding table for the code lengths l: entries
// indexed by the next `bits` input bits (reversed codes, as deflate sends them); longer codes
// go through a subtable. Unused entries decode as kindBad. As zlib, an over-subscribed or
// incomplete code is an error, except a code of one symbol (length 1) or of none.
func buildTable(t []uint32, l []uint8, bits uint, entry func(int) (uint32, bool)) ([]uint32, error) {
	var sc tableScratch
	return sc.build(t, l, bits, entry)
}

func (sc *tableScratch) build(t []uint32, l []uint8, bits uint, entry func(int) (uint32, bool)) ([]uint32, error) {
	var count [16]int
	maxLen := 0
	for _, n := range l {
		count[n]++
		if int(n) > maxLen {
			maxLen = int(n)
		}
	}
	count[0] = 0
	left := 1
	for n := 1; n < 16; n++ {
		left = left<<1 - count[n]
		if left < 0 {
			return nil, errInflateCorrupt
		}
	}
	if left > 0 && maxLen > 1 {
		return nil, errInflateCorrupt
	}
	var next [16]int
	code := 0
	for n := 1; n < 16; n++ {
		code = (code + count[n-1]) << 1
		next[n] = code
	}
	size := 1 << bits
	t = t[:0]
	for range size {
		t = append(t, kindBad)
	}
	// Subtables: for each primary index whose codes are longer than bits, the longest length
	// below it decides the subtable's index bits.
	subBits := sc.subBits[:size]
	clear(subBits)
	for sym, n := range l {
		if n == 0 {
			continue
		}
		c := reverse(uint16(next[n]), n)
		sc.codes[sym] = c
		next[n]++
		if uint(n) > bits {
			p := int(c) & (size - 1)
			if b := uint8(uint(n) - bits); b > subBits[p] {
				subBits[p] = b
			}
		}
	}
	for p := 0; p < size; p++ { // in index order: the layout is deterministic
		if b := subBits[p]; b != 0 {
			sc.subStart[p] = uint16(len(t))
			t[p] = kindSub | uint32(b)<<12 | uint32(len(t))<<16 | uint32(bits)
			for range 1 << b {
				t = append(t, kindBad)
			}
		}
	}
	for sym, n := range l {
		if n == 0 {
			continue
		}
		e, ok := entry(sym)
		if !ok {
			continue // a length for an invalid symbol: decoding it fails (kindBad)
		}
		c := int(sc.codes[sym])
		if uint(n) <= bits {
			for i := c; i < size; i += 1 << n {
				t[i] = e | uint32(n)
			}
			continue
		}
		p := c & (size - 1)
		b := subBits[p]
		sub := int(sc.subStart[p])
		for i := c >> bits; i < 1<<b; i += 1 << (uint(n) - bits) {
			t[sub+i] = e | uint32(uint(n)-bits)
		}
	}
	return t, nil
}

func reverse(c uint16, n uint8) uint16 {
	var r uint16
	for range n {
		r = r<<1 | c&1
		c >>= 1
	}
	return r
}

// inflater holds the tables of dynamic blocks, reused across clusters.
type inflater struct {
	lit, dist, cl []uint32
	lens          [320]uint8
	sc            tableScratch
}

type bitReader struct {
	src   []byte
	pos   int
	bits  uint64
	nbits uint
	over  int // bytes of zeros read past the end
}

func (b *bitReader) refill() {
	if b.pos+8 <= len(b.src) {
		b.bits |= binary.LittleEndian.Uint64(b.src[b.pos:]) << b.nbits
		b.pos += int(63-b.nbits) >> 3
		b.nbits |= 56
		return
	}
	for b.nbits <= 56 {
		if b.pos < len(b.src) {
			b.bits |= uint64(b.src[b.pos]) << b.nbits
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

// decode reads one symbol with table t (bits primary index bits); the caller has refilled.
func decode(b *bitReader, t []uint32, bits uint) uint32 {
	e := t[b.bits&(1<<bits-1)]
	if e&kindMask == kindSub {
		b.bits >>= bits
		b.nbits -= bits
		sub := e >> 16
		e = t[sub+uint32(b.bits&(1<<(e>>12&0xf)-1))]
	}
	n := uint(e & 0xff)
	b.bits >>= n
	b.nbits -= n
	return e
}

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
			done, err := f.codes(&b, dst, &op, fixedLit, fixedDist)
			if err != nil || done {
				return err
			}
		case 2:
			if err := f.dynamic(&b); err != nil {
				return err
			}
			done, err := f.codes(&b, dst, &op, f.lit, f.dist)
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
	var err error
	if f.cl, err = f.sc.build(f.cl, cl[:], 7, clEntry); err != nil {
		return err
	}
	lens := f.lens[:hlit+hdist]
	for i := 0; i < len(lens); {
		b.refill()
		e := decode(b, f.cl, 7)
		if e&kindMask == kindBad {
			return errInflateCorrupt
		}
		sym := e >> 16
		switch {
		case sym < 16:
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
	if f.lit, err = f.sc.build(f.lit, lens[:hlit], litBits, litEntry); err != nil {
		return err
	}
	f.dist, err = f.sc.build(f.dist, lens[hlit:], distBits, distEntry)
	return err
}

// codes decodes one Huffman block into dst from *op. done: dst is full. The bit buffer lives
// in locals here (the hot loop); it is written back to b on return.
func (f *inflater) codes(b *bitReader, dst []byte, op *int, lit, dist []uint32) (done bool, err error) {
	src := b.src
	bits, nbits, pos, over := b.bits, b.nbits, b.pos, b.over
	o := *op
	for {
		// refill to >= 56 bits: enough for a length and a distance with their extra bits
		if pos+8 <= len(src) {
			bits |= binary.LittleEndian.Uint64(src[pos:]) << nbits
			pos += int(63-nbits) >> 3
			nbits |= 56
		} else {
			for nbits <= 56 {
				if pos < len(src) {
					bits |= uint64(src[pos]) << nbits
					pos++
				} else {
					over++
				}
				nbits += 8
			}
		}
		e := lit[bits&(1<<litBits-1)]
		if e&kindMask == kindLit {
			// up to three literals per refill (15 bits each at most)
			for k := 0; ; k++ {
				n := uint(e & 0xff)
				bits >>= n
				nbits -= n
				dst[o] = byte(e >> 16)
				o++
				if o == len(dst) {
					done = true
					goto out
				}
				if k == 2 {
					break
				}
				e = lit[bits&(1<<litBits-1)]
				if e&kindMask != kindLit {
					break
				}
			}
			if e&kindMask == kindLit {
				continue
			}
			if nbits < 48 {
				continue // refill before a length
			}
		}
		if e&kindMask == kindSub {
			bits >>= litBits
			nbits -= litBits
			e = lit[e>>16+uint32(bits&(1<<(e>>12&0xf)-1))]
		}
		{
			n := uint(e & 0xff)
			bits >>= n
			nbits -= n
		}
		switch e & kindMask {
		case kindLit: // from a subtable
			dst[o] = byte(e >> 16)
			o++
			if o == len(dst) {
				done = true
				goto out
			}
			continue
		case kindEOB:
			goto out
		case kindBad, kindSub:
			err = errInflateCorrupt
			goto out
		}
		length := int(e >> 16)
		if x := uint(e >> 12 & 0xf); x != 0 {
			length += int(bits & (1<<x - 1))
			bits >>= x
			nbits -= x
		}
		d := dist[bits&(1<<distBits-1)]
		if d&kindMask == kindSub {
			bits >>= distBits
			nbits -= distBits
			d = dist[d>>16+uint32(bits&(1<<(d>>12&0xf)-1))]
		}
		if d&kindMask != 0 {
			err = errInflateCorrupt
			goto out
		}
		{
			n := uint(d & 0xff)
			bits >>= n
			nbits -= n
		}
		distance := int(d >> 16)
		if x := uint(d >> 12 & 0xf); x != 0 {
			distance += int(bits & (1<<x - 1))
			bits >>= x
			nbits -= x
		}
		if distance > o {
			err = errInflateCorrupt
			goto out
		}
		if over*8 > int(nbits) {
			err = errInflateShort
			goto out
		}
		end := min(o+length, len(dst)) // as qemu: a full cluster ends the decode mid-match
		if distance >= 8 && end-o <= 32 && o+32 <= len(dst) {
			// short match: whole words, overshooting into bytes written later anyway
			for k := 0; k < end-o; k += 8 {
				binary.LittleEndian.PutUint64(dst[o+k:], binary.LittleEndian.Uint64(dst[o+k-distance:]))
			}
			o = end
		} else {
			// doubling copy: the source grows with what is written (period distance)
			start := o - distance
			for o < end {
				o += copy(dst[o:end], dst[start:o])
			}
		}
		if o == len(dst) {
			done = true
			goto out
		}
	}
out:
	b.bits, b.nbits, b.pos, b.over = bits, nbits, pos, over
	*op = o
	if err == nil && b.overrun() {
		err = errInflateShort
	}
	return done, err
}

// check fails when the decode used bits past the end of the input.
func (b *bitReader) check() error {
	if b.overrun() {
		return errInflateShort
	}
	return nil
}
