package rootfs

import (
	"context"
	"fmt"
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
	img := disk.FromDisk(name, raw, true)
	part, err := findRoot(img)
	if err != nil {
		return nil, err
	}
	return pl.write(ctx, img, part, func(off, n int64) error { return vdisk.ZeroRange(f, off, n) })
}

// fits is write's first check, that the entries fit a ROOT of size bytes, made before the
// tests' bake copies the image.
func (pl *plan) fits(size int64) (int64, error) {
	need, err := capacity(size, pl.entries)
	if err != nil {
		return need, fmt.Errorf("%s: %w; grow partition 9 (ROOT) of the image first, or add less", pl.src, err)
	}
	return need, nil
}
