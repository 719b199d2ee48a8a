package build

import (
	"context"
	"fmt"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
)

// StepBakeRoot writes the sysexts, their /etc/extensions links, the kubeadm.service drop-in and
// (unless --keep-updates) the update-engine/locksmithd masks into a fresh ROOT filesystem that
// carries the work copy's ROOT (pkg/rootfs: no mount, no root, verified by reading it back).
type StepBakeRoot struct{}

func (*StepBakeRoot) Name() string { return "bake ROOT" }

func (*StepBakeRoot) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	exts, _ := state.Get(KeySysexts).([]Sysext)
	layout := rootfs.Layout{KeepUpdates: o.KeepUpdates}
	var extra []string
	for _, x := range exts {
		layout.Extensions = append(layout.Extensions, rootfs.Extension{Name: x.Name, FileName: x.FileName, Source: x.Path})
		extra = append(extra, x.Path)
	}
	entries, err := layout.Entries()
	if err != nil {
		return halt(state, err)
	}
	// The work copy is this build's own: bake in place (no second copy of the image); a failure
	// fails the build, whose directory is removed.
	work := getString(state, KeyWork)
	res, err := rootfs.BakeInPlace(ctx, work, entries)
	if err != nil {
		return halt(state, fmt.Errorf("baking into ROOT: %w", err))
	}
	state.Put(KeyRaw, work)
	prev, _ := state.Get(KeyExtraArtifacts).([]string)
	state.Put(KeyExtraArtifacts, append(prev, extra...))
	note(state, "ROOT rebuilt and verified: %d entries carried, %d added (%d MiB of files)", res.Carried, res.Added, res.WrittenData>>20)
	return multistep.ActionContinue
}

func (*StepBakeRoot) Cleanup(multistep.StateBag) {}
