package oem

import "time"

// stampWith makes fsys stamp t on what it writes, where it records a time (btrfs; go-diskfs'
// ext4 stamps time.Now and has no parameter for it).
func stampWith(fsys Filesystem, t time.Time) {
	if b, ok := fsys.(*btrfsFS); ok && !t.IsZero() {
		b.fs.Now = t
	}
}
