package imagebuild

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
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// stepResolve turns the channel/version into a release number (version.txt for aliases), then
// fixes the image name, the output directory, the artifact path and the inputs key. The steps
// after it read the resolved options; the caller's stay as given.
type stepResolve struct {
	sysextDir string // --sysext downloads, removed by Cleanup
}

func (*stepResolve) Name() string { return "resolve" }

func (s *stepResolve) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	r, err := resolve(ctx, options(state), s.sysextDownloadDir)
	if err != nil {
		return halt(state, err)
	}
	o, rel, rec := r.options, r.release, buildRecord(state)
	keyOptions.put(state, o)
	keyRelease.put(state, rel)
	keySysextFiles.put(state, r.sysext)
	keyArtifact.put(state, ArtifactPath(o))
	rec.KubernetesVersion, rec.ImageName = o.Kubernetes.Kubernetes, o.ImageName
	rec.FlatcarVersion, rec.Channel, rec.Arch = rel.Version, rel.Channel, rel.Arch
	rec.Inputs, rec.InputsKey = r.inputs, r.inputsKey
	if o.BaseImage == "" {
		rec.Base.URL = redact.URL(rel.URL(release.ImageFile(o.Base, release.CompressionNone)))
	}
	note(state, "Flatcar %s %s (%s), Kubernetes %s -> %s", rel.Channel, rel.Version, rel.Arch, o.Kubernetes.Kubernetes, ArtifactPath(o))
	return multistep.ActionContinue
}

// resolution is what resolve found.
type resolution struct {
	options *Options // a copy of the given options with every value exact
	release release.Release
	sysext  map[string]sysextSource // each --sysext's file and sha512
	inputs  record.Inputs
	// inputsKey is the inputs' key, with what is hashed but never stored (proxy passwords,
	// local paths).
	inputsKey string
}

// resolve makes the given options exact: the release (a local image names none: the user's
// --version, else "local"), the Kubernetes versions, the image name and the absolute output
// directory; --sysext URLs are downloaded into dir. given is not changed.
func resolve(ctx context.Context, given *Options, dir func() (string, error)) (resolution, error) {
	o := *given
	r := resolution{options: &o, release: o.Release}
	if o.BaseImage != "" { // refused before anything is downloaded or read
		if err := disk.CheckFile(o.BaseImage); err != nil {
			return r, fmt.Errorf("--base-image: %w", err)
		}
	}
	// --sysext files first (a URL is downloaded): the Kubernetes version is read from inside them.
	sx, srcs, err := sysextInputs(ctx, &o, dir)
	if err != nil {
		return r, err
	}
	r.sysext = srcs
	if err := resolveKubernetes(ctx, o.client(), &o, srcs); err != nil {
		return r, err
	}
	switch {
	case o.BaseImage != "" && release.IsAlias(r.release.Version):
		r.release.Version = "local"
	case o.BaseImage == "":
		if r.release, err = fetch.Resolve(ctx, o.client(), r.release); err != nil {
			return r, err
		}
	}
	o.ImageName = cmp.Or(o.ImageName, DefaultImageName(o.Method, r.release.Channel, r.release.Version, o.Kubernetes.Kubernetes))
	if o.OutputDir, err = filepath.Abs(cmp.Or(o.OutputDir, filepath.Join("output", o.ImageName))); err != nil {
		return r, err
	}
	var paths []string
	if r.inputs, paths, err = inputs(&o, r.release); err != nil {
		return r, err
	}
	r.inputs.Sysext = sx
	r.inputsKey = r.inputs.Key(o.Images.secrets(), paths)
	return r, nil
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

// inputs are what decides the artifact's content (their key decides reuse), and the build host's
// paths of local inputs, which only the key holds.
func inputs(o *Options, rel release.Release) (in record.Inputs, paths []string, err error) {
	in = record.Inputs{Method: o.Method, Channel: rel.Channel, Version: rel.Version, Arch: rel.Arch, Base: o.Base,
		OEM: o.OEM, Kubernetes: o.Kubernetes.Kubernetes, Crictl: o.Kubernetes.Crictl, CNI: o.Kubernetes.CNI,
		KubernetesMirror: redact.URL(o.Kubernetes.Mirror), GitHubMirror: redact.URL(o.Kubernetes.GitHubMirror),
		KeepUpdates: o.KeepUpdates, DiskSize: o.DiskSize, Images: o.Images.inputs(),
		Compressed: o.Compress, ProtectiveMBR: true, USBStorageOff: !o.Node.KeepUSBStorage, EnableSysext: o.Node.EnableSysext, ReleaseFileServer: o.Node.ReleaseFileServer}
	if o.Containerd.Version != "" {
		in.Containerd = o.Containerd.Version + " runc " + o.Containerd.Runc
	}
	if o.BaseImage != "" {
		fi, err := os.Stat(o.BaseImage)
		if err != nil {
			return in, nil, fmt.Errorf("--base-image: %w", err)
		}
		// The record keeps the file's name; its path (a build-host path) only goes into the key.
		in.BaseImage = fmt.Sprintf("%s:%d:%d", filepath.Base(o.BaseImage), fi.Size(), fi.ModTime().UnixNano())
		paths = append(paths, o.BaseImage)
	} else {
		in.ReleaseServer = redact.URL(rel.Server)
	}
	if in.NodeFiles, err = nodeFilesDigest(o); err != nil {
		return in, nil, fmt.Errorf("the node files: %w", err)
	}
	for _, p := range o.Provision {
		sum, _, err := digest.SHA256(p)
		if err != nil {
			return in, nil, fmt.Errorf("--provision: %w", err)
		}
		in.Provision = append(in.Provision, sum+":"+filepath.Base(p)) // the content decides, not where it lies
	}
	return in, paths, nil
}
