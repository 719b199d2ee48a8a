package qcow2

import (
	"bytes"
	stdflate "compress/flate"
	"math/rand"
	"testing"
)

// A minimal deflate encoder for dynamic blocks with code lengths the test chooses, so that
// the decoder meets what compressors rarely emit: 15-bit literal, length and distance codes
// (subtables in both tables), every length and distance symbol with its extra bits, and
// matches that end exactly at the end of the cluster or run past it.

type bitWriter struct {
	out   []byte
	acc   uint64
	nbits uint
}

func (w *bitWriter) put(v uint64, n uint) {
	w.acc |= v << w.nbits
	w.nbits += n
	for w.nbits >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nbits -= 8
	}
}

func (w *bitWriter) bytes() []byte {
	if w.nbits > 0 {
		w.out = append(w.out, byte(w.acc))
	}
	return w.out
}

// canonical returns each symbol's code, bit-reversed as deflate sends it.
func canonical(l []uint8) []uint16 {
	var count [16]int
	for _, n := range l {
		count[n]++
	}
	count[0] = 0
	var next [16]int
	code := 0
	for n := 1; n < 16; n++ {
		code = (code + count[n-1]) << 1
		next[n] = code
	}
	c := make([]uint16, len(l))
	for s, n := range l {
		if n != 0 {
			c[s] = bits16(next[n], uint(n))
			next[n]++
		}
	}
	return c
}

// staircase gives syms lengths first, first+1, ... and the last two the same length: a
// complete code for a Kraft mass of 2^-(first-1).
func staircase(l []uint8, first uint8, syms ...int) {
	for i, s := range syms {
		l[s] = first + uint8(min(i, len(syms)-2))
	}
}

type craftCode struct {
	lit  [286]uint8
	dist [30]uint8
}

// deepCode: literals 0x40-0x7f at 7 bits and a staircase down to 15 bits of literals, length
// symbols and end of block; distances a staircase from 1 to 15 bits.
func deepCode() craftCode {
	var c craftCode
	for s := 0x40; s < 0x80; s++ {
		c.lit[s] = 7
	}
	staircase(c.lit[:], 2, 0x00, 257, 0x01, 266, 0x02, 273, 0x03, 280, 0x04, 0x05, 269, 0x06, 256, 284, 285)
	staircase(c.dist[:], 1, 0, 1, 4, 8, 12, 16, 20, 22, 24, 26, 27, 28, 29, 5, 13, 25)
	return c
}

// shallowCode: every literal, length and distance symbol (short codes, the fast paths).
func shallowCode() craftCode {
	var c craftCode
	for s := range 256 {
		c.lit[s] = 9
	}
	// 256 literals at 9 bits are half the Kraft mass; the other half, 30 symbols: 2 at 3
	// bits (1/4), 4 at 6 bits (1/16) and 24 at 7 bits (3/16).
	syms := []int{256}
	for s := 257; s < 286; s++ {
		syms = append(syms, s)
	}
	for i, s := range syms {
		switch {
		case i < 2:
			c.lit[s] = 3
		case i < 6:
			c.lit[s] = 6
		default:
			c.lit[s] = 7
		}
	}
	for s := range c.dist { // 30 symbols: 2 at 4 bits (1/8) and 28 at 5 bits (28/32)
		c.dist[s] = 5
		if s < 2 {
			c.dist[s] = 4
		}
	}
	return c
}

// craftStream encodes random literals and matches with code c into blocks (final set on the
// last), producing at least n bytes, and returns the stream and its decoded bytes.
func craftStream(rng *rand.Rand, c craftCode, n, blocks int) (stream, want []byte) {
	var w bitWriter
	litCodes, distCodes := canonical(c.lit[:]), canonical(c.dist[:])
	var lits, lens, dists []int
	for s, l := range c.lit {
		switch {
		case l == 0 || s == 256:
		case s < 256:
			lits = append(lits, s)
		default:
			lens = append(lens, s)
		}
	}
	for s, l := range c.dist {
		if l != 0 {
			dists = append(dists, s)
		}
	}
	sym := func(s int) { w.put(uint64(litCodes[s]), uint(c.lit[s])) }
	for b := range blocks {
		final := b == blocks-1
		w.put(map[bool]uint64{false: 0, true: 1}[final], 1)
		w.put(2, 2)
		w.put(286-257, 5)
		w.put(30-1, 5)
		w.put(19-4, 4)
		for i := range 19 { // code-length code: symbols 0-15 at 4 bits, 16-18 unused
			l := uint64(4)
			if clOrder[i] >= 16 {
				l = 0
			}
			w.put(l, 3)
		}
		var cll [19]uint8
		for s := range 16 {
			cll[s] = 4
		}
		clCodes := canonical(cll[:])
		for _, l := range append(c.lit[:], c.dist[:]...) {
			w.put(uint64(clCodes[l]), 4)
		}
		end := n * (b + 1) / blocks
		if final {
			end = n + 300 // run past the cluster: the decode stops when it is full
		}
		for len(want) < end {
			if len(want) == 0 || rng.Intn(3) == 0 {
				s := lits[rng.Intn(len(lits))]
				sym(s)
				want = append(want, byte(s))
				continue
			}
			ls := lens[rng.Intn(len(lens))]
			ex := uint(lenExtra[ls-257])
			xv := rng.Intn(1 << ex)
			length := int(lenBase[ls-257]) + xv
			var ds, dv int
			for {
				ds = dists[rng.Intn(len(dists))]
				dv = rng.Intn(1 << dstExtra[ds])
				if int(dstBase[ds])+dv <= len(want) {
					break
				}
				if ds == 0 { // distance 1 always fits
					break
				}
			}
			distance := int(dstBase[ds]) + dv
			if distance > len(want) {
				ds, dv, distance = 0, 0, 1
			}
			sym(ls)
			w.put(uint64(xv), ex)
			w.put(uint64(distCodes[ds]), uint(c.dist[ds]))
			w.put(uint64(dv), uint(dstExtra[ds]))
			for k := 0; k < length; k++ {
				want = append(want, want[len(want)-distance])
			}
		}
		sym(256)
	}
	return append(w.bytes(), make([]byte, 64)...), want
}

// Hand-made dynamic blocks with 15-bit codes (subtables for literals, lengths and distances)
// and with every length and distance symbol decode to what was encoded, at cluster sizes that
// run the fast loop, only the careful one, and their hand-over; the last match runs past the
// end of the cluster, which ends the decode as qemu does.
func TestInflateClusterCraftedCodes(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	var f inflater
	for name, c := range map[string]craftCode{"deep": deepCode(), "shallow": shallowCode()} {
		for _, n := range []int{512, 600, fastOut - 1, fastOut, fastOut + 1, 4096, 65536, 2 << 20} {
			for _, blocks := range []int{1, 3} {
				for rep := 0; rep < 4; rep++ {
					src, want := craftStream(rng, c, n, blocks)
					out := make([]byte, n)
					if err := f.inflateCluster(out, src); err != nil {
						t.Fatalf("%s code, %d bytes, %d blocks: %v", name, n, blocks, err)
					}
					if d := firstDiff(out, want[:n]); d >= 0 {
						t.Fatalf("%s code, %d bytes, %d blocks: byte %d differs", name, n, blocks, d)
					}
					if max15 := maxLen(f.lens[:286]); name == "deep" && max15 != 15 {
						t.Fatalf("the deep code's longest literal/length code is %d bits, want 15", max15)
					}
				}
			}
		}
	}
}

func maxLen(l []uint8) uint8 {
	m := uint8(0)
	for _, n := range l {
		m = max(m, n)
	}
	return m
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Matches of every overlap: distance 1 (runs of one byte), 2-7 (words that overlap what they
// copy), 8 up to the length (overlapping word copies) and beyond it, 258-byte runs that end
// exactly at the end of the cluster or cross it, decoded into clusters of several sizes.
func TestInflateClusterMatchOverlaps(t *testing.T) {
	var f inflater
	for _, period := range []int{1, 2, 3, 5, 7, 8, 9, 15, 16, 31, 40, 41, 64, 100, 257, 258, 300, 1000} {
		for _, n := range []int{512, fastOut + 7, 4096, 65536} {
			for _, tail := range []int{0, 1, 258, 259, 1000} { // bytes encoded past the cluster
				rng := rand.New(rand.NewSource(int64(period*n + tail)))
				unit := make([]byte, period)
				rng.Read(unit)
				data := bytes.Repeat(unit, (n+tail)/period+1)[:n+tail]
				for _, lvl := range []int{1, 9} {
					var buf bytes.Buffer
					w, _ := stdflate.NewWriter(&buf, lvl)
					w.Write(data)
					w.Close()
					out := make([]byte, n)
					if err := f.inflateCluster(out, buf.Bytes()); err != nil {
						t.Fatalf("period %d, cluster %d, tail %d: %v", period, n, tail, err)
					}
					if d := firstDiff(out, data[:n]); d >= 0 {
						t.Fatalf("period %d, cluster %d, tail %d, level %d: byte %d differs", period, n, tail, lvl, d)
					}
				}
			}
		}
	}
}

// A stored block followed by compressed blocks whose matches reach back into the stored bytes
// (the compressed part is deflated with the stored bytes as its dictionary).
func TestInflateClusterStoredThenCompressed(t *testing.T) {
	var f inflater
	text := clusterInputs()["text"]
	for _, k := range []int{0, 1, 100, 4095, 40000} {
		stored := text[:k]
		rest := text[k:]
		hdr := []byte{0, byte(k), byte(k >> 8), ^byte(k), ^byte(k >> 8)} // BFINAL 0, BTYPE 00
		var buf bytes.Buffer
		w, _ := stdflate.NewWriterDict(&buf, 6, stored)
		w.Write(rest)
		w.Close()
		src := append(append(hdr, stored...), buf.Bytes()...)
		out := make([]byte, len(text))
		if err := f.inflateCluster(out, src); err != nil {
			t.Fatalf("stored %d: %v", k, err)
		}
		if d := firstDiff(out, text); d >= 0 {
			t.Fatalf("stored %d: byte %d differs", k, d)
		}
	}
}
