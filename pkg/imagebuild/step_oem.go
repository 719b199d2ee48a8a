package imagebuild

import (
	"context"
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// stepOEM sets --oem (flatcar.oem.id) and --release-file-server's kernel argument in the work
// image's OEM grub.cfg, removes flatcar.autologin and replaces a hybrid MBR with a protective one,
// in place, with oem.Set: the edit `oem set IMAGE --id --linux-append --protective-mbr` makes. The edit is a
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
	mbr, err := disk.ReadMBR(img.Disk)
	if err != nil {
		return halt(state, fmt.Errorf("%s: %w", img.Path, err))
	}
	// A hybrid MBR (Flatcar LTS 4081, releases before 4459.2.0) becomes a protective one: Glance
	// 2026.2 refuses the image otherwise, and Nova's image inspection too.
	res, err := oem.Set(img, oem.SetOptions{ID: o.OEM, LinuxAppend: o.Node.kernelArg(), ProtectiveMBR: true, Time: keyEpoch.get(state)})
	if err != nil {
		return halt(state, fmt.Errorf("setting the OEM id: %w", err))
	}
	rec := keyRecord.get(state)
	rec.Base.MBR, rec.Base.MBRReplaced = string(mbr.Kind), res.MBRReplaced
	msg := fmt.Sprintf("oem_id %q -> %q, linux_append %q -> %q", res.Before.OEMID, res.After.OEMID, res.Before.LinuxAppend, res.After.LinuxAppend)
	if res.MBRReplaced {
		msg += "; the base's hybrid MBR replaced with a protective MBR"
	}
	note(state, "%s", msg)
	return multistep.ActionContinue
}
