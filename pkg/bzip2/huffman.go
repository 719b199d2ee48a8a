package bzip2

// Canonical Huffman decoding with a lookup table on the first fastBits bits;
// the rare longer codes fall back to a per-length search.

const (
	maxCodeLen = 20
	fastBits   = 10
	maxAlpha   = 258
)

type huffman struct {
	// fast[v] = sym<<5 | len for codes of len <= fastBits starting with the
	// fastBits-bit prefix v; 0 means a longer code (or an unused prefix).
	fast [1 << fastBits]uint16
	// For codes longer than fastBits: limit[l] is one past the last code of
	// length l (left-aligned to l bits), first[l] the first, and
	// sorted[index[l]+code-first[l]] the symbol.
	limit, first [maxCodeLen + 1]uint32
	index        [maxCodeLen + 1]uint16
	sorted       [maxAlpha]uint16
	maxLen       uint
}

// init builds the decoder for the given code lengths (1..20). Incomplete codes
// (as lbzip2 writes) are fine; over-subscribed ones are corrupt.
func (h *huffman) init(lengths []uint8) error {
	var count [maxCodeLen + 1]uint32
	h.maxLen = 0
	for _, l := range lengths {
		count[l]++
		if uint(l) > h.maxLen {
			h.maxLen = uint(l)
		}
	}
	var code uint32
	var idx uint16
	for l := 1; l <= maxCodeLen; l++ {
		h.first[l] = code
		h.index[l] = idx
		code += count[l]
		if code > 1<<l {
			return corruptf("over-subscribed Huffman code")
		}
		h.limit[l] = code
		idx += uint16(count[l])
		code <<= 1
	}
	// Symbols sorted by (length, value) get consecutive codes.
	var next [maxCodeLen + 1]uint16
	copy(next[:], h.index[:])
	for sym, l := range lengths {
		h.sorted[next[l]] = uint16(sym)
		next[l]++
	}
	clear(h.fast[:])
	for l := 1; l <= fastBits && l <= int(h.maxLen); l++ {
		for i := uint32(0); i < count[l]; i++ {
			c := h.first[l] + i
			sym := h.sorted[uint32(h.index[l])+i]
			shift := fastBits - l
			e := sym<<5 | uint16(l)
			for v := c << shift; v < (c+1)<<shift; v++ {
				h.fast[v] = e
			}
		}
	}
	return nil
}

// slow decodes a code longer than fastBits (or reports an unused prefix).
// br must hold at least maxCodeLen bits.
func (h *huffman) slow(br *bitReader) (uint16, error) {
	for l := uint(fastBits + 1); l <= h.maxLen; l++ {
		c := uint32(br.bits >> (64 - l))
		if c < h.limit[l] {
			if c < h.first[l] {
				break
			}
			br.consume(l)
			return h.sorted[uint32(h.index[l])+c-h.first[l]], nil
		}
	}
	return 0, corruptf("invalid Huffman code")
}
