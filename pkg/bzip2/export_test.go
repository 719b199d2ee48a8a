package bzip2

// blockCRC is bzip2's CRC of p in one call, for the tests.
func blockCRC(p []byte) uint32 {
	var s crcState
	s.update(p)
	return s.sum()
}
