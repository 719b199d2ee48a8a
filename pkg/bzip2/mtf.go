package bzip2

// decodeMTF decodes the Huffman-coded MTF/RLE2 symbols of a block into the
// low bytes of d.tt and returns the block length.
//
// Symbols 0 and 1 (RUNA, RUNB) spell a run length of the front MTF byte in
// bijective base 2; symbol s in 2..alphaSize-2 moves MTF entry s-1 to the
// front and emits it; alphaSize-1 ends the block.
func (d *decoder) decodeMTF(br *bitReader, mtf *[256]byte, alphaSize, nSelectors int) (int, error) {
	tt := d.tt[:maxBlockSize]
	eob := uint16(alphaSize - 1)
	n := 0
	run, runBit := 0, 0
	for sel := 0; ; sel++ {
		if sel >= nSelectors {
			return 0, corruptf("block data runs past its selectors")
		}
		if br.overrun() {
			return 0, errNeedMore
		}
		h := &d.tables[d.selectors[sel]]
		for k := 0; k < groupSize; k++ {
			if br.n < maxCodeLen {
				br.refill()
			}
			e := h.fast[br.bits>>(64-fastBits)]
			var sym uint16
			if e != 0 {
				sym = e >> 5
				br.consume(uint(e & 31))
			} else {
				var err error
				if sym, err = h.slow(br); err != nil {
					return 0, err
				}
			}
			if sym <= 1 {
				// Run lengths above the block size are corrupt; the bound
				// also keeps runBit from overflowing.
				run += int(sym+1) << runBit
				runBit++
				if run > maxBlockSize {
					return 0, corruptf("run past the end of the block")
				}
				continue
			}
			if run > 0 {
				if n+run > len(tt) {
					return 0, corruptf("block longer than %d bytes", maxBlockSize)
				}
				b := uint32(mtf[0])
				for i := n; i < n+run; i++ {
					tt[i] = b
				}
				n += run
				run, runBit = 0, 0
			}
			if sym == eob {
				return n, nil
			}
			if n >= len(tt) {
				return 0, corruptf("block longer than %d bytes", maxBlockSize)
			}
			idx := int(sym - 1)
			b := mtf[idx]
			copy(mtf[1:idx+1], mtf[:idx])
			mtf[0] = b
			tt[n] = uint32(b)
			n++
		}
	}
}
