package rootfs

import (
	"context"
	"fmt"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// The tests' bakes: Bake of a raw image file in place, and Bake's rules on a copy, the way the
// build used to call it.

// bakeInPlace is Bake of the raw image file at path, as the build bakes its raw work copy.
func bakeInPlace(path string, added []Entry) (*Result, error) {
	img, err := disk.Open(path, true)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	return Bake(context.Background(), img, added, time.Time{})
}

// bake writes dst: a copy of the raw image src whose ROOT is a fresh ext4 holding the original
// ROOT's entries plus added (an added entry replaces an original one of the same path and type;
// missing parent directories are created 0755 root:root). src is only read. dst appears only
// when complete and verified; on any failure nothing is left behind. Added entries without a
// ModTime get the bake's epoch (the original ROOT's time): the same
// inputs give the same bytes (reproducible.go).
func bake(ctx context.Context, src, dst string, added []Entry) (*Result, error) {
	start := time.Now()
	in, err := disk.Open(src, false)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if in.Format != disk.FormatRaw {
		return nil, fmt.Errorf("%s is a %s image; the ROOT bake works on a raw image: convert it first with 'flatcar-capo convert %s OUT.raw'", src, in.Format, src)
	}
	part, err := findRoot(in)
	if err != nil {
		return nil, err
	}
	pl, err := newPlan(src, in.Section(part), disk.PartitionName(part), added, time.Time{})
	if err != nil {
		return nil, err
	}
	if _, err := pl.fits(part.Size); err != nil {
		return nil, err
	}
	out, err := atomicfile.Create(dst)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	if err := disk.CopySparse(ctx, out.File, in.File()); err != nil {
		return nil, fmt.Errorf("copying %s: %w", src, err)
	}
	res, err := pl.writeFile(ctx, out.File, dst)
	if err != nil {
		return nil, err
	}
	if err := out.Commit(0o644); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}
