package imagebuild

import (
	"context"
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// stepOEM sets --oem (flatcar.oem.id) in the work image's OEM grub.cfg and removes
// flatcar.autologin, in place, with oem.Set: the edit `oem set IMAGE --id` makes. The edit is a
// few KiB written at once: a cancellation is honoured only before it starts.
type stepOEM struct{ noCleanup }

func (*stepOEM) Name() string { return "oem" }

func (*stepOEM) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	img, err := openWork(state)
	if err != nil {
		return halt(state, err)
	}
	if err := ctx.Err(); err != nil {
		return halt(state, fmt.Errorf("setting the OEM id: %w", err))
	}
	res, err := oem.Set(img, oem.SetOptions{ID: o.OEM, Time: keyEpoch.get(state)})
	if err != nil {
		return halt(state, fmt.Errorf("setting the OEM id: %w", err))
	}
	note(state, "oem_id %q -> %q, linux_append %q -> %q", res.Before.OEMID, res.After.OEMID, res.Before.LinuxAppend, res.After.LinuxAppend)
	return multistep.ActionContinue
}
