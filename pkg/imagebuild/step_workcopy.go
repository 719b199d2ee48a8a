package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// stepWorkCopy makes the work image the method changes; the base image is only read. Overlay
// methods get a copy-on-write overlay over the base; the others a sparse raw copy (a qcow2 base
// through convert.File, as `flatcar-capo convert` does, a raw one through disk.CopySparse,
// reflink where the filesystem can). Its Cleanup closes whatever work image the build ended with.
type stepWorkCopy struct{}

func (*stepWorkCopy) Name() string { return "work copy" }

func (s *stepWorkCopy) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	base := keyBase.get(state)
	dir := keyWorkDir.get(state)
	work := filepath.Join(dir, "work.raw")
	img, err := disk.Open(base, false)
	if err != nil {
		return halt(state, fmt.Errorf("base image: %w", err))
	}
	format := img.Format
	if overlayMethods[options(state).Method] {
		ov, err := vdisk.NewOverlay(img.Disk, dir)
		if err != nil {
			img.Close()
			return halt(state, fmt.Errorf("making the work copy's overlay in %s: %w", dir, err))
		}
		keyWorkImage.put(state, &workImage{disk.FromDisk(base, ov, true), func() error { ov.Close(); return img.Close() }})
		note(state, "copy-on-write overlay over the %s base (%s virtual; nothing copied)", format, progress.Bytes(img.Size()))
	} else {
		if format == disk.FormatQcow2 {
			img.Close()
			if _, err := convert.File(ctx, base, work, convert.Options{To: disk.FormatRaw}); err != nil {
				return halt(state, err)
			}
		} else {
			out, err := os.OpenFile(work, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				err = disk.CopySparse(ctx, out, img.File())
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
			img.Close()
			if err != nil {
				return halt(state, fmt.Errorf("copying %s: %w", base, err))
			}
		}
		setWorkFile(state, work)
		fi, _ := os.Stat(work)
		note(state, "%s from %s (%s virtual)", filepath.Base(work), format, progress.Bytes(fi.Size()))
	}
	// A fetched base in the build directory: the overlay goes on reading it (unlinked, it lives
	// until closed); a copy no longer needs it (the cache keeps the download).
	if filepath.Dir(base) == dir {
		os.Remove(base)
	}
	return multistep.ActionContinue
}

func (s *stepWorkCopy) Cleanup(state multistep.StateBag) { closeWork(state) }
