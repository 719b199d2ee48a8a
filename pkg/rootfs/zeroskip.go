package rootfs

import (
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// zeroSkip passes writes to a device whose whole range reads as zeros (ROOT after vdisk.ZeroRange),
// except all-zero writes to bytes not written since: those would change nothing. go-diskfs's
// Create writes the inode tables as zeros (hundreds of MiB for a Flatcar ROOT); skipping them
// keeps the image sparse and the bake fast. A zero write that overlaps anything written before
// is passed through, so the device's content is exactly what it would be without skipping.
type zeroSkip struct {
	vdisk.Disk
	on      bool
	written vdisk.Ranges
	skipped int64
}

func (z *zeroSkip) WriteAt(p []byte, off int64) (int, error) {
	if !z.on {
		return z.Disk.WriteAt(p, off)
	}
	end := off + int64(len(p))
	if vdisk.IsZero(p) && !z.written.Overlaps(off, end) {
		z.skipped += int64(len(p))
		return len(p), nil
	}
	n, err := z.Disk.WriteAt(p, off)
	z.written.Add(off, off+int64(n))
	return n, err
}
