package bzip2

// Inverse BWT. After the usual counting pass, tt[j] holds the byte of sorted
// rotation j and the index of the rotation that follows it in the text, so
// the text is one cycle through tt starting after origPtr.
//
// Following that cycle is a chain of dependent loads into an array larger
// than L2: one step per memory latency. To keep many loads in flight, the
// cycle is cut at travSegments arbitrary entries (flagged in tt) and
// travLanes interleaved walkers each decode one segment at a time into
// chunks of scratch memory. A segment ends when its walker meets the flag of
// another segment's start; the segments are then stitched in cycle order.

const (
	travLanes    = 16
	travSegments = 256
	chunkSize    = 1024
	flagBit      = 1 << 31
	idxMask      = 1<<23 - 1
	scratchSize  = maxBlockSize + (travSegments+travLanes+1)*chunkSize
)

type lane struct {
	f        uint32 // next tt index to visit
	pos, end int32  // write position and end of the current chunk
	seg      int32  // segment being decoded, -1 when idle
}

type chunk struct{ seg, from, to int32 }

// inverseBWT decodes the len(pre) bytes held in the low bytes of d.tt into pre.
func (d *decoder) inverseBWT(pre []byte, origPtr int) error {
	n := len(pre)
	tt := d.tt[:n]
	var cf [256]uint32
	for _, v := range tt {
		cf[byte(v)]++
	}
	sum := uint32(0)
	for i, c := range cf {
		cf[i] = sum
		sum += c
	}
	for i := range tt {
		b := byte(tt[i])
		tt[cf[b]] |= uint32(i) << 8
		cf[b]++
	}
	first := tt[origPtr] >> 8
	if n < 64*chunkSize {
		f := first
		for k := range pre {
			x := tt[f]
			pre[k] = byte(x)
			f = x >> 8
		}
		return nil
	}

	// Segment starts: the text's first rotation plus evenly spread indices
	// (which are at unrelated, effectively random, text positions).
	starts := d.starts[:0]
	starts = append(starts, first)
	for i := 1; i < travSegments; i++ {
		if s := uint32(i * n / travSegments); s != first {
			starts = append(starts, s)
		}
	}
	for _, s := range starts {
		tt[s] |= flagBit
	}
	succ := d.succ[:len(starts)]
	chunks := d.chunks[:0]
	scratch := d.scratch
	bump := int32(0)
	nextSeg := 0
	var lanes [travLanes]lane

	// begin starts segment seg on ln, taking its first (flagged) step.
	begin := func(ln *lane, seg int) {
		ln.seg = int32(seg)
		ln.pos, ln.end = bump, bump+chunkSize
		bump += chunkSize
		x := tt[starts[seg]]
		scratch[ln.pos] = byte(x)
		ln.pos++
		ln.f = x >> 8 & idxMask
	}
	active := 0
	for l := range lanes {
		lanes[l].seg = -1
		if nextSeg < len(starts) {
			begin(&lanes[l], nextSeg)
			nextSeg++
			active++
		}
	}
	for active > 0 {
		for l := range lanes {
			ln := &lanes[l]
			if ln.seg < 0 {
				continue
			}
			x := tt[ln.f]
			if x&flagBit != 0 {
				// Reached the start of another segment: this one is done.
				chunks = append(chunks, chunk{ln.seg, ln.end - chunkSize, ln.pos})
				succ[ln.seg] = ln.f
				if nextSeg < len(starts) {
					begin(ln, nextSeg)
					nextSeg++
				} else {
					ln.seg = -1
					active--
				}
				continue
			}
			if ln.pos == ln.end {
				chunks = append(chunks, chunk{ln.seg, ln.end - chunkSize, ln.pos})
				ln.pos, ln.end = bump, bump+chunkSize
				bump += chunkSize
			}
			scratch[ln.pos] = byte(x)
			ln.pos++
			ln.f = x >> 8 & idxMask
		}
	}
	d.chunks = chunks

	// Stitch: chunks of one segment are in order; segments follow succ.
	segChunks := d.segChunks[:len(starts)]
	for i := range segChunks {
		segChunks[i] = segChunks[i][:0]
	}
	for i, c := range chunks {
		segChunks[c.seg] = append(segChunks[c.seg], int32(i))
	}
	k := 0
	seg := 0
	for range starts {
		for _, ci := range segChunks[seg] {
			c := chunks[ci]
			k += copy(pre[k:], scratch[c.from:c.to])
		}
		if seg = segmentOf(starts, succ[seg]); seg <= 0 {
			break
		}
	}
	if seg != 0 || k == 0 {
		return corruptf("bad BWT permutation")
	}
	// A periodic block makes the permutation several cycles; the text is
	// the first one repeated (what walking n steps would give).
	for k < n {
		k += copy(pre[k:], pre[:k])
	}
	return nil
}

func segmentOf(starts []uint32, idx uint32) int {
	for i, s := range starts {
		if s == idx {
			return i
		}
	}
	return -1
}
