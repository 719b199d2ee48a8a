package bzip2

import (
	"errors"
	"fmt"
)

const (
	blockMagic   = 0x314159265359
	eosMagic     = 0x177245385090
	maxBlockSize = 900000
	maxGroups    = 6
	maxSelectors = 18002 // enough for maxBlockSize symbols; more are read and ignored
	groupSize    = 50
)

// errNeedMore means the block runs past the data it was given: either the
// split point after it was a false magic match, or the input is truncated.
var errNeedMore = errors.New("bzip2: block continues past its data")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// decoder holds one worker's scratch memory (about 8 MB, reused per block).
type decoder struct {
	tt        []uint32 // BWT vector: next index << 8 | byte
	scratch   []byte   // segments of the inverse BWT walk
	starts    []uint32
	succ      []uint32
	chunks    []chunk
	segChunks [][]int32
	tables    [maxGroups]huffman
	selectors [maxSelectors]uint8
}

func newDecoder() *decoder {
	return &decoder{
		tt:        make([]uint32, maxBlockSize),
		scratch:   make([]byte, scratchSize),
		starts:    make([]uint32, 0, travSegments),
		succ:      make([]uint32, travSegments),
		segChunks: make([][]int32, travSegments),
	}
}

// blockResult is what decoding one block yields.
type blockResult struct {
	out     blockOutput
	bits    int64  // compressed size of the block in bits, magic included
	crc     uint32 // CRC computed over the output
	want    uint32 // CRC stored in the block header
	n       int    // block length before the initial run-length decoding
	origPtr int    // BWT origin
	err     error
}

// decodeBlock decodes the block whose magic starts at bit skip of data. The
// output is kept run-length encoded (see blockOutput) in pre, reused if it
// is large enough, so a block of runs costs at most about 2 MB of memory.
func (d *decoder) decodeBlock(data []byte, skip uint, pre []byte) (r blockResult) {
	br := newBitReader(data, skip)
	start := br.offset()
	r.err = d.decodeSymbols(&br, &r)
	if br.overrun() || (r.err != nil && br.pos > len(data)) {
		// Whatever went wrong involved (or peeked at) bits past the data
		// given: more data decides.
		r.err = errNeedMore
	}
	if r.err != nil {
		return r
	}
	r.bits = br.offset() - start
	if cap(pre) < r.n {
		pre = make([]byte, r.n, maxBlockSize)
	}
	pre = pre[:r.n]
	if r.err = d.inverseBWT(pre, r.origPtr); r.err != nil {
		return r
	}
	r.out, r.crc = scanRLE1(pre)
	return r
}

// decodeSymbols parses the block header and Huffman tables and decodes the
// MTF/RLE2 symbols into the low bytes of d.tt[:n].
func (d *decoder) decodeSymbols(br *bitReader, r *blockResult) error {
	if magic := uint64(br.read(24))<<24 | uint64(br.read(24)); magic != blockMagic {
		return corruptf("bad block magic %#x", magic)
	}
	r.want = br.read(32)
	if br.bit() {
		return corruptf("randomised blocks (bzip2 < 0.9.5) are not supported")
	}
	origPtr := int(br.read(24))

	// Symbol map: which byte values occur, in order.
	var mtf [256]byte
	nInUse := 0
	used := br.read(16)
	for i := 0; i < 16; i++ {
		if used&(0x8000>>i) == 0 {
			continue
		}
		bits := br.read(16)
		for j := 0; j < 16; j++ {
			if bits&(0x8000>>j) != 0 {
				mtf[nInUse] = byte(i*16 + j)
				nInUse++
			}
		}
	}
	if nInUse == 0 {
		return corruptf("block uses no symbols")
	}
	alphaSize := nInUse + 2

	nGroups := int(br.read(3))
	if nGroups < 2 || nGroups > maxGroups {
		return corruptf("bad Huffman group count %d", nGroups)
	}
	nSelectors := int(br.read(15))
	if nSelectors < 1 {
		return corruptf("no Huffman selectors")
	}
	groupMTF := [maxGroups]uint8{0, 1, 2, 3, 4, 5}
	for i := 0; i < nSelectors; i++ {
		j := 0
		for br.bit() {
			j++
			if j >= nGroups {
				return corruptf("bad Huffman selector")
			}
		}
		if br.overrun() {
			return errNeedMore
		}
		g := groupMTF[j]
		copy(groupMTF[1:j+1], groupMTF[:j])
		groupMTF[0] = g
		if i < maxSelectors {
			d.selectors[i] = g
		}
	}
	nSelectors = min(nSelectors, maxSelectors)

	var lengths [maxAlpha]uint8
	for g := 0; g < nGroups; g++ {
		l := int(br.read(5))
		for s := 0; s < alphaSize; s++ {
			for {
				if l < 1 || l > maxCodeLen {
					return corruptf("bad Huffman code length")
				}
				if !br.bit() {
					break
				}
				if br.bit() {
					l--
				} else {
					l++
				}
				if br.overrun() {
					return errNeedMore
				}
			}
			lengths[s] = uint8(l)
		}
		if err := d.tables[g].init(lengths[:alphaSize]); err != nil {
			return err
		}
	}
	if br.overrun() {
		return errNeedMore
	}

	n, err := d.decodeMTF(br, &mtf, alphaSize, nSelectors)
	if err != nil {
		return err
	}
	if origPtr >= n {
		return corruptf("BWT origin %d outside block of %d bytes", origPtr, n)
	}
	r.n, r.origPtr = n, origPtr
	return nil
}
