package rootfs

import (
	"sort"

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
	written []span // sorted, disjoint, merged
	skipped int64
}

type span struct{ start, end int64 }

func (z *zeroSkip) WriteAt(p []byte, off int64) (int, error) {
	if !z.on {
		return z.Disk.WriteAt(p, off)
	}
	end := off + int64(len(p))
	if vdisk.IsZero(p) && !z.overlaps(off, end) {
		z.skipped += int64(len(p))
		return len(p), nil
	}
	n, err := z.Disk.WriteAt(p, off)
	z.add(off, off+int64(n))
	return n, err
}

// overlaps reports whether [start, end) touches a written span.
func (z *zeroSkip) overlaps(start, end int64) bool {
	i := sort.Search(len(z.written), func(i int) bool { return z.written[i].end > start })
	return i < len(z.written) && z.written[i].start < end
}

// add records [start, end) as written, merging with neighbours.
func (z *zeroSkip) add(start, end int64) {
	if start >= end {
		return
	}
	i := sort.Search(len(z.written), func(i int) bool { return z.written[i].end >= start })
	j := i
	for j < len(z.written) && z.written[j].start <= end {
		start = min(start, z.written[j].start)
		end = max(end, z.written[j].end)
		j++
	}
	z.written = append(z.written[:i], append([]span{{start, end}}, z.written[j:]...)...)
}
