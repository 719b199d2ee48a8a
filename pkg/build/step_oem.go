package build

import (
	"context"
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// stepOEM sets --oem (flatcar.oem.id) in the output image's OEM grub.cfg and removes
// flatcar.autologin, in place, with oem.SetFile: the call `oem set IMAGE --id` makes.
type stepOEM struct{ noCleanup }

func (*stepOEM) Name() string { return "oem" }

func (*stepOEM) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	var res oem.SetResult
	var err error
	if w := overlay(state); w != nil {
		if err = ctx.Err(); err == nil {
			res, err = oem.Set(w.image(true), oem.SetOptions{ID: o.OEM})
		}
	} else {
		raw := getString(state, KeyRaw)
		if raw == "" {
			return halt(state, fmt.Errorf("the %s method produced no image", o.Method))
		}
		res, err = oem.SetFile(ctx, raw, oem.Output{}, oem.SetOptions{ID: o.OEM})
	}
	if err != nil {
		return halt(state, fmt.Errorf("setting the OEM id: %w", err))
	}
	note(state, "oem_id %q -> %q, linux_append %q -> %q", res.Before.OEMID, res.After.OEMID, res.Before.LinuxAppend, res.After.LinuxAppend)
	return multistep.ActionContinue
}
