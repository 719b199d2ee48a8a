package imagebuild

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// --containerd-version: the node runs that containerd (a sysext made from its release tarball
// and runc, as the bakery makes it) instead of Flatcar's built-in containerd-flatcar, which is
// masked. Both methods bake the same sysext: the sysext method into ROOT, the packer method
// through the payload (packer/scripts/install-containerd-sysext.sh).

// validateContainerd checks --containerd-version and --runc-version (from the build's arch and
// --github-mirror); nothing to do without --containerd-version.
func (o *Options) validateContainerd() error {
	if o.Containerd.Version == "" {
		if o.Containerd.Runc != "" {
			return errs.Invalidf("--runc-version goes with --containerd-version (Flatcar's own containerd brings its runc)")
		}
		return nil
	}
	o.Containerd.Arch = o.Release.Arch
	o.Containerd.GitHubMirror = cmp.Or(o.Containerd.GitHubMirror, o.Kubernetes.GitHubMirror)
	return o.Containerd.Validate()
}

// stepContainerd downloads containerd's release tarball and runc and checks each against its
// published sha256 before anything boots.
type stepContainerd struct{ noCleanup }

func (*stepContainerd) Name() string { return "containerd" }

func (*stepContainerd) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	if o.Containerd.Version == "" {
		note(state, "Flatcar's own containerd (no --containerd-version)")
		return multistep.ActionContinue
	}
	co := o.Containerd
	co.CacheDir = cmp.Or(co.CacheDir, downloadCache(o, state))
	set, err := containerd.Download(ctx, o.client(), co, indented{o.Log, "  "})
	if err != nil {
		return halt(state, err)
	}
	keyContainerd.put(state, set)
	for _, d := range []containerd.Downloaded{set.Tarball, set.Runc} {
		rec.Downloads = append(rec.Downloads, record.Download{Name: filepath.Base(d.Path), URL: redact.URL(d.URL), SHA256: d.SHA256})
	}
	note(state, "containerd %s with runc %s: sha256-verified", co.Version, co.Runc)
	return multistep.ActionContinue
}

// makeContainerdSysext writes the containerd sysext of the verified downloads into dir; nil
// without --containerd-version.
func makeContainerdSysext(ctx context.Context, state multistep.StateBag, dir string) (*Sysext, error) {
	set := keyContainerd.get(state)
	if set == nil {
		return nil, nil
	}
	name, err := sysext.ContainerdFileName(set.Options.Version, set.Options.Arch)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, name)
	in := sysext.ContainerdInputFromSet(set)
	in.ModTime = buildTime(state)
	spec, err := sysext.ContainerdSpec(in)
	if err != nil {
		return nil, err
	}
	if _, err := sysext.Create(ctx, spec, out); err != nil {
		return nil, fmt.Errorf("making the containerd sysext: %w", err)
	}
	o := options(state)
	if _, err := sysext.Check(out, sysext.ContainerdName, sysext.FlatcarHost(o.Release.Arch)); err != nil {
		return nil, fmt.Errorf("the containerd sysext made here fails its own check: %w", err)
	}
	return &Sysext{Name: sysext.ContainerdName, FileName: name, Source: fmt.Sprintf("made from containerd %s and runc %s", set.Options.Version, set.Options.Runc), Path: out}, nil
}
