package rootfs

import (
	"context"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// writeFile is write on the raw image file f (the tests' bake of a copy).
func (pl *plan) writeFile(ctx context.Context, f *os.File, name string) (*Result, error) {
	raw, err := vdisk.NewFile(f, true)
	if err != nil {
		return nil, err
	}
	return pl.write(ctx, disk.FromDisk(name, raw, true), func(off, n int64) error { return vdisk.ZeroRange(f, off, n) })
}
