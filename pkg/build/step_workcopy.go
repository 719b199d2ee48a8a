package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

// stepWorkCopy makes the sparse raw work copy the method changes; the base image is only read.
// A qcow2 base goes through convert.File (as `flatcar-capo convert` does), a raw one through
// disk.CopySparse (reflink where the filesystem can).
type stepWorkCopy struct{}

func (*stepWorkCopy) Name() string { return "work copy" }

func (*stepWorkCopy) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	base := getString(state, KeyBase)
	dir := getString(state, KeyWorkDir)
	work := filepath.Join(dir, "work.raw")
	img, err := disk.Open(base, false)
	if err != nil {
		return halt(state, fmt.Errorf("base image: %w", err))
	}
	format := img.Format
	if format == disk.FormatQcow2 {
		img.Close()
		if _, err := convert.File(ctx, base, work, convert.Options{To: disk.FormatRaw}); err != nil {
			return halt(state, err)
		}
	} else {
		err := copyRaw(ctx, img.File(), work)
		img.Close()
		if err != nil {
			return halt(state, fmt.Errorf("copying %s: %w", base, err))
		}
	}
	// The fetched copy in the build directory is no longer needed (the cache keeps the download).
	if filepath.Dir(base) == dir {
		os.Remove(base)
	}
	state.Put(KeyWork, work)
	fi, _ := os.Stat(work)
	note(state, "%s from %s (%s virtual)", filepath.Base(work), format, progress.Bytes(fi.Size()))
	return multistep.ActionContinue
}

func copyRaw(ctx context.Context, src *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := disk.CopySparse(ctx, out, src); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (*stepWorkCopy) Cleanup(multistep.StateBag) {}
