package imagebuild

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

// stepGrowDisk finishes --disk-size: Packer grew the raw disk, which leaves the backup GPT
// header where the old end was; it is moved to the new end (as `sgdisk -e` does), so the GPT is
// valid and Flatcar's first boot can grow ROOT into the new space.
type stepGrowDisk struct{ noCleanup }

func (*stepGrowDisk) Name() string { return "disk size" }

func (*stepGrowDisk) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	if o.DiskSize == 0 {
		note(state, "kept the base image's size (no --disk-size)")
		return multistep.ActionContinue
	}
	raw := keyWorkFile.get(state) // packer's disk, a file: grown before anything opens it
	fi, err := os.Stat(raw)
	if err != nil {
		return halt(state, err)
	}
	if fi.Size() < o.DiskSize {
		// Packer 1.6.6 may leave a disk it did not grow; grow it here (sparse).
		if err := os.Truncate(raw, o.DiskSize); err != nil {
			return halt(state, fmt.Errorf("growing %s to --disk-size: %w", raw, err))
		}
	}
	if err := disk.RelocateBackupGPT(raw); err != nil {
		return halt(state, fmt.Errorf("moving the backup GPT to the end of the grown disk: %w", err))
	}
	note(state, "disk is %s; backup GPT moved to its end", progress.Bytes(o.DiskSize))
	return multistep.ActionContinue
}
