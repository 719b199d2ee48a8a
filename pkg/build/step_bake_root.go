package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
	work := getString(state, KeyWork)
	baked := filepath.Join(getString(state, KeyWorkDir), "baked.raw")
	res, err := rootfs.Bake(ctx, work, baked, entries)
	if err != nil {
		return halt(state, fmt.Errorf("baking into ROOT: %w", err))
	}
	os.Remove(work) // the baked copy replaces it; keep one image's worth of disk
	state.Put(KeyWork, baked)
	state.Put(KeyRaw, baked)
	prev, _ := state.Get(KeyExtraArtifacts).([]string)
	state.Put(KeyExtraArtifacts, append(prev, extra...))
	note(state, "ROOT rebuilt and verified: %d entries carried, %d added (%d MiB of files)", res.Carried, res.Added, res.WrittenData>>20)
	return multistep.ActionContinue
}

func (*StepBakeRoot) Cleanup(multistep.StateBag) {}
