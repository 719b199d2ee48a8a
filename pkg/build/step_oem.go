package build

import (
	"context"
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// StepOEM sets --oem (flatcar.oem.id) in the output image's OEM grub.cfg and removes
// flatcar.autologin, in place, with the library call `oem set IMAGE --id` makes.
type StepOEM struct{}

func (*StepOEM) Name() string { return "oem" }

func (*StepOEM) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	raw := getString(state, KeyRaw)
	if raw == "" {
		return halt(state, fmt.Errorf("the %s method produced no image", o.Method))
	}
	opts := oem.SetOptions{ID: o.OEM}
	if _, err := opts.Validate(); err != nil {
		return halt(state, fmt.Errorf("--oem: %w", err))
	}
	img, err := disk.Open(raw, true)
	if err != nil {
		return halt(state, err)
	}
	res, err := oem.Set(img, opts)
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return halt(state, fmt.Errorf("setting the OEM id: %w", err))
	}
	note(state, "oem_id %q -> %q, linux_append %q -> %q", res.Before.OEMID, res.After.OEMID, res.Before.LinuxAppend, res.After.LinuxAppend)
	return multistep.ActionContinue
}

func (*StepOEM) Cleanup(multistep.StateBag) {}
