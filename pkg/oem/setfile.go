package oem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Output says where SetFile writes. An empty Path edits the image in place.
type Output struct {
	Path string
	// Format of Path: "" takes it from Path's extension (.qcow2, .raw, .bin), else the input's.
	Format   disk.Format
	Compress bool // deflate the clusters of a qcow2 output
}

// SetFile applies opts to the image file image: in place when out.Path is empty, else into a
// new sparse copy at out.Path (raw or qcow2), leaving image untouched. The copy is made on a
// temporary file next to out.Path and renamed into place only when complete, so a failure or a
// cancelled ctx leaves nothing there. This is what `oem set` and build's OEM step call.
func SetFile(ctx context.Context, image string, out Output, opts SetOptions) (res SetResult, err error) {
	defer func() {
		if out.Path == "" {
			err = interrupt.Nothing(err, image+" was not changed")
		} else {
			err = interrupt.Nothing(err, out.Path+" was not written (its temporary file was removed) and "+image+" is untouched")
		}
	}()
	if _, err := opts.Validate(); err != nil {
		return SetResult{}, err
	}
	if out.Path == "" {
		// The edit is a few KiB written at once: a cancellation is honoured only before it
		// starts, so the image is either untouched or fully edited.
		img, err := disk.Open(image, true)
		if err != nil {
			return SetResult{}, err
		}
		if err := ctx.Err(); err != nil {
			img.Close()
			return SetResult{}, err
		}
		res, err := Set(img, opts)
		if cerr := img.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", image, cerr)
		}
		return res, err
	}
	if err := atomicfile.CheckPath(out.Path); err != nil { // before the copy
		return SetResult{}, err
	}
	if same, _ := convert.SameFile(image, out.Path); same {
		return SetResult{}, errs.Invalidf("--output-file %s is IMAGE itself; omit --output-file to edit in place", out.Path)
	}
	src, err := disk.Open(image, false)
	if err != nil {
		return SetResult{}, err
	}
	defer src.Close()
	format, err := convert.OutputFormat(out.Path, out.Format)
	if err != nil {
		if out.Format != "" {
			return SetResult{}, err
		}
		format = src.Format // an ambiguous name (.img) keeps the input's format
	}
	if out.Compress && format != disk.FormatQcow2 {
		return SetResult{}, errs.Invalidf("--compress needs qcow2 output; %s will be %s", out.Path, format)
	}
	// The edit happens on a sparse raw work copy next to the output; it becomes the output
	// (raw) or is streamed into it (qcow2), and never lingers after a failure.
	work, err := atomicfile.Create(out.Path)
	if err != nil {
		return SetResult{}, err
	}
	defer work.Abort()
	if src.Format == disk.FormatQcow2 {
		err = qcow2.CopyToRaw(ctx, src.Disk, work.File, 0, nil)
	} else {
		err = disk.CopySparse(ctx, work.File, src.File())
	}
	if err != nil {
		return SetResult{}, fmt.Errorf("copying %s to %s: %w", image, out.Path, err)
	}
	img, err := disk.Open(work.Name(), true)
	if err != nil {
		return SetResult{}, err
	}
	// What Set finds wrong in the content is the input's; only a failed write is the output's.
	img.Path = image
	res, err = Set(img, opts)
	res.Image = out.Path
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Path == work.Name() {
		err = fmt.Errorf("writing %s: %w", out.Path, err)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return res, err
	}
	if format == disk.FormatRaw {
		return res, work.Commit(0o644)
	}
	rawSrc, err := vdisk.NewFile(work.File, false)
	if err != nil {
		return res, err
	}
	_, _, err = convert.Write(ctx, rawSrc, out.Path, disk.FormatQcow2, convert.Options{Compress: out.Compress})
	return res, err
}
