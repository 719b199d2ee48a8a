package imagebuild

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// stepBakeRoot writes the sysexts, their /etc/extensions links, the kubeadm.service drop-in and
// (unless --keep-updates) the update-engine/locksmithd masks into a fresh ROOT filesystem that
// carries the work image's ROOT (pkg/rootfs: no mount, no root, verified by reading it back).
type stepBakeRoot struct{ noCleanup }

func (*stepBakeRoot) Name() string { return "bake ROOT" }

func (*stepBakeRoot) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	layout := rootfs.Layout{KeepUpdates: o.KeepUpdates}
	var extra []record.Artifact
	for _, x := range keySysexts.get(state) {
		layout.Extensions = append(layout.Extensions, rootfs.Extension{Name: x.Name, FileName: x.FileName, Source: x.Path})
		extra = append(extra, record.Artifact{File: filepath.Base(x.Path), Bytes: x.Bytes, SHA512: x.SHA512})
		if x.Name == sysext.ContainerdName { // ours replaces Flatcar's: mask it, as the bakery documents
			layout.Masked = append(layout.Masked, sysext.FlatcarContainerdName)
		}
	}
	entries, err := layout.Entries()
	if err != nil {
		return halt(state, err)
	}
	imgEntries, err := imageEntries(ctx, state)
	if err != nil {
		return halt(state, err)
	}
	entries = append(entries, imgEntries...)
	// The files made in this run have this run's mtimes: give them the build's epoch (set by
	// stepSysext), so the same inputs make the same ROOT.
	t := buildTime(state)
	for i := range entries {
		entries[i].ModTime = t
	}
	// The work image is this build's own: bake in place (no second copy of the image); a failure
	// fails the build, whose directory is removed.
	img, err := openWork(state)
	if err != nil {
		return halt(state, err)
	}
	res, err := rootfs.Bake(ctx, img, entries, t)
	if err != nil {
		return halt(state, fmt.Errorf("baking into ROOT: %w", err))
	}
	keyExtra.put(state, append(keyExtra.get(state), extra...))
	note(state, "ROOT rebuilt and verified: %d entries carried, %d added (%d MiB of files)", res.Carried, res.Added, res.WrittenData>>20)
	return multistep.ActionContinue
}

// imageEntries are the node settings' files (nodesettings.go), the preloaded images' archive and
// the node's containerd settings and import unit (stepImages planned them).
func imageEntries(ctx context.Context, state multistep.StateBag) ([]rootfs.Entry, error) {
	out := options(state).Node.entries() // USB storage, official extensions: with or without images
	plan := keyImages.get(state)
	if plan == nil {
		return out, nil
	}
	var size int64
	if plan.Archive != nil {
		a := plan.Archive
		size = a.Size
		out = append(out, rootfs.Entry{Path: node.InRoot(node.ImagesArchive), Mode: 0o600, Size: a.Size,
			Open: func() (io.ReadCloser, error) { return a.Reader(ctx), nil }})
	}
	files, err := plan.Node.Files(size)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Mode&fs.ModeSymlink != 0 {
			out = append(out, rootfs.Symlink(f.Path, string(f.Content)))
			continue
		}
		out = append(out, rootfs.Bytes(f.Path, f.Mode, f.Content))
	}
	return out, nil
}
