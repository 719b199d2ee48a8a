package build

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// stepResolve turns the channel/version into a release number (version.txt for aliases), then
// fixes the image name, the output directory, the artifact path and the inputs key.
type stepResolve struct {
	sysextDir string // --sysext downloads, removed by Cleanup
}

func (*stepResolve) Name() string { return "resolve" }

func (s *stepResolve) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), record(state)
	rel := o.Release
	if o.BaseImage != "" { // refused before anything is downloaded or read
		if err := disk.CheckFile(o.BaseImage); err != nil {
			return halt(state, fmt.Errorf("--base-image: %w", err))
		}
	}
	// --sysext files first (a URL is downloaded): the Kubernetes version is read from inside them.
	sx, srcs, err := sysextInputs(ctx, o, s.sysextDownloadDir)
	if err != nil {
		return halt(state, err)
	}
	if err := resolveKubernetes(ctx, o.client(), o, srcs); err != nil {
		return halt(state, err)
	}
	rec.KubernetesVersion = o.Kubernetes.Kubernetes
	switch {
	case o.BaseImage != "" && release.IsAlias(rel.Version):
		// A local image names no release; the user's --version does, else it is "local".
		rel.Version = "local"
	case o.BaseImage == "":
		r, err := fetch.Resolve(ctx, o.client(), rel)
		if err != nil {
			return halt(state, err)
		}
		rel = r
	}
	keyRelease.put(state, rel)
	rec.FlatcarVersion, rec.Channel, rec.Arch = rel.Version, rel.Channel, rel.Arch
	o.ImageName = cmp.Or(o.ImageName, DefaultImageName(o.Method, rel.Channel, rel.Version, o.Kubernetes.Kubernetes))
	o.OutputDir = cmp.Or(o.OutputDir, filepath.Join("output", o.ImageName))
	abs, err := filepath.Abs(o.OutputDir)
	if err != nil {
		return halt(state, err)
	}
	o.OutputDir = abs
	rec.ImageName = o.ImageName
	keyArtifact.put(state, ArtifactPath(o))
	in, err := inputs(o, rel)
	if err != nil {
		return halt(state, err)
	}
	in.Sysext = sx
	keySysextFiles.put(state, srcs)
	rec.Inputs, rec.InputsKey = in, in.Key()
	if o.BaseImage == "" {
		rec.Base.URL = redact.URL(rel.URL(release.ImageFile(o.Base, release.CompressionNone)))
	}
	note(state, "Flatcar %s %s (%s), Kubernetes %s -> %s", rel.Channel, rel.Version, rel.Arch, o.Kubernetes.Kubernetes, ArtifactPath(o))
	return multistep.ActionContinue
}

func (s *stepResolve) Cleanup(multistep.StateBag) {
	if s.sysextDir != "" {
		os.RemoveAll(s.sysextDir)
	}
}

// resolveKubernetes makes --kubernetes-version exact. With --sysext (nothing downloaded, maybe
// air-gapped) the version is the one inside the Kubernetes sysext, and a --kubernetes-version that
// disagrees is refused; with no Kubernetes sysext an exact --kubernetes-version is required (no
// marker file is read). Otherwise the mirror's stable.txt / stable-1.NN.txt decides.
func resolveKubernetes(ctx context.Context, c *httpx.Client, o *Options, srcs map[string]sysextSource) error {
	k := &o.Kubernetes
	if !kubernetes.IsExact(k.Kubernetes) {
		o.KubernetesRequested = k.Kubernetes
	}
	if needsKubernetesDownloads(o) {
		return k.Resolve(ctx, c)
	}
	v, from, err := sysextKubernetes(ctx, o, srcs)
	if err != nil && !(errors.Is(err, errVersionUnknown) && kubernetes.IsExact(k.Kubernetes)) {
		return err
	}
	if v == "" {
		if kubernetes.IsExact(k.Kubernetes) {
			return k.Validate()
		}
		return errs.Invalidf("no --sysext holds Kubernetes (an extension-release.%s or usr/bin/kubeadm), so its version is unknown: pass --kubernetes-version vX.Y.Z", sysext.KubernetesName)
	}
	if err := agreeWithSysext(k.Kubernetes, v, from); err != nil {
		return err
	}
	o.KubernetesRequested, o.KubernetesFrom = "", from
	k.Kubernetes = v
	return k.Validate()
}

// ArtifactPath is <output dir>/<image name>.qcow2.
func ArtifactPath(o *Options) string { return filepath.Join(o.OutputDir, o.ImageName+".qcow2") }

// inputs are what decides the artifact's content; their key decides reuse.
func inputs(o *Options, rel release.Release) (Inputs, error) {
	in := Inputs{Method: o.Method, Channel: rel.Channel, Version: rel.Version, Arch: rel.Arch, Base: o.Base,
		OEM: o.OEM, Kubernetes: o.Kubernetes.Kubernetes, Crictl: o.Kubernetes.Crictl, CNI: o.Kubernetes.CNI,
		KubernetesMirror: redact.URL(o.Kubernetes.Mirror), GitHubMirror: redact.URL(o.Kubernetes.GitHubMirror),
		KeepUpdates: o.KeepUpdates, DiskSize: o.DiskSize, Images: o.Images.inputs(o.Method),
		Compressed: o.Compress, secrets: o.Images.secrets()}
	if o.BaseImage != "" {
		fi, err := os.Stat(o.BaseImage)
		if err != nil {
			return in, fmt.Errorf("--base-image: %w", err)
		}
		in.BaseImage = fmt.Sprintf("%s:%d:%d", o.BaseImage, fi.Size(), fi.ModTime().UnixNano())
	} else {
		in.ReleaseServer = redact.URL(rel.Server)
	}
	for _, p := range o.Provision {
		sum, _, err := digest.SHA256(p)
		if err != nil {
			return in, fmt.Errorf("--provision: %w", err)
		}
		in.Provision = append(in.Provision, sum+":"+p)
	}
	return in, nil
}
