package build

import (
	"context"
	"errors"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// StepPacker boots the work copy under Packer and provisions it (pkg/packer).
type StepPacker struct{}

func (*StepPacker) Name() string { return "packer" }

func (*StepPacker) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	return halt(state, errors.New("the packer step is not wired yet (pkg/packer lands next)"))
}

func (*StepPacker) Cleanup(multistep.StateBag) {}
