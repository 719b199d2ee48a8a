package btrfs

// generation is the inode's creation transaction, which only the tests read.
func (i inodeItem) generation() uint64 { return le.Uint64(i[0:]) }
