package bzip2

// inverseBWT undoes the Burrows-Wheeler transform of the n bytes in the low
// bytes of d.tt into d.pre[:n].
//
// Following the permutation is a chain of dependent loads into an array
// larger than L2, so it runs at memory latency. Two independent chains
// (forward from the start of the block, backward from its end) give the CPU
// two misses to overlap, nearly halving the time.
func (d *decoder) inverseBWT(n, origPtr int) {
	tt, bk, pre := d.tt[:n], d.bk[:n], d.pre[:n]
	var cf [256]uint32
	for _, v := range tt {
		cf[byte(v)]++
	}
	sum := uint32(0)
	for i, c := range cf {
		cf[i] = sum
		sum += c
	}
	// Entry j of the sorted rotations is followed by entry i in the text:
	// tt[j] gets next=i, bk[i] gets prev=j and the byte at j.
	for i := range tt {
		b := byte(tt[i])
		j := cf[b]
		cf[b]++
		tt[j] |= uint32(i) << 8
		bk[i] = j<<8 | uint32(byte(tt[j]))
	}
	// pre[k] is the byte at chain position k+1 from origPtr; the chain is a
	// cycle of length n, so pre[n-1] is the byte at origPtr itself.
	start := tt[origPtr] >> 8
	half := n / 2
	f, b := start, start
	lo, hi := 0, n-1
	for lo < half {
		x := tt[f]
		y := bk[b]
		pre[lo] = byte(x)
		pre[hi] = byte(y)
		f = x >> 8
		b = y >> 8
		lo++
		hi--
	}
	for ; lo <= hi; lo++ {
		x := tt[f]
		pre[lo] = byte(x)
		f = x >> 8
	}
}
