package bzip2

// unRLE1 undoes bzip2's first run-length stage, appending to dst: four equal
// bytes are followed by a count (0..255) of further copies.
func unRLE1(dst, src []byte) []byte {
	lit := 0 // start of the literal bytes not yet copied
	k := 0
	for k+3 < len(src) {
		b := src[k]
		if b != src[k+1] {
			k++
			continue
		}
		if b != src[k+2] || b != src[k+3] {
			k++
			continue
		}
		dst = append(dst, src[lit:k+4]...)
		k += 4
		if k < len(src) {
			c := int(src[k])
			k++
			dst = grow(dst, c)
			tail := dst[len(dst)-c:]
			for i := range tail {
				tail[i] = b
			}
		}
		lit = k
	}
	return append(dst, src[lit:]...)
}

// grow extends dst by c bytes (their content is unspecified).
func grow(dst []byte, c int) []byte {
	if n := len(dst) + c; n <= cap(dst) {
		return dst[:n]
	}
	return append(dst, make([]byte, c)...)
}
