package fetch

import (
	"bytes"
	"context"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// Request is `fetch`'s: what to fetch (Options; its Keyring comes from KeyringFile), through
// which network settings.
type Request struct {
	Options
	Network httpx.Options
	// KeyringFile replaces the embedded Flatcar key; unused with InsecureSkipVerify.
	KeyringFile string
}

// FetchRelease checks r (release, image, network, output, keyring) before any request, then
// fetches the image as Fetch does (with the default cache unless r names one).
func FetchRelease(ctx context.Context, r Request) (*Result, error) {
	if err := validateSource(&r.Release, r.Image, &r.Network); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.OutputFile != "" { // the default name needs the resolved version: Fetch checks it then
		if err := atomicfile.CheckPath(r.OutputFile); err != nil {
			return nil, err
		}
	}
	var err error
	if r.Keyring, err = verify.KeyringInForce(r.KeyringFile, r.InsecureSkipVerify); err != nil {
		return nil, err
	}
	return Fetch(ctx, httpx.New(r.Network), r.Options)
}

// validateSource normalises the architecture and checks the release, the image and the
// network settings that release and fetch share; its errors wrap errs.ErrInvalid.
func validateSource(rel *release.Release, image string, net *httpx.Options) error {
	a, err := release.ParseArch(rel.Arch)
	if err != nil {
		return err
	}
	rel.Arch = a
	if err := rel.Validate(); err != nil {
		return err
	}
	if err := release.ValidateImage(image); err != nil {
		return errs.Invalidf("invalid --image: %w", err)
	}
	return net.Validate()
}

// DescribeOptions are `release`'s: the release and image, the network, and optionally a
// Kubernetes version to resolve with it (Kubernetes.Kubernetes empty: none; the mirrors are
// checked anyway).
type DescribeOptions struct {
	Release    release.Release
	Image      string
	Network    httpx.Options
	Kubernetes kubernetes.Options
}

// Description is a resolved release: its number and the URLs of its image files; its JSON is
// `release -o json`.
type Description struct {
	Channel          string             `json:"channel"`
	Arch             string             `json:"arch"`
	RequestedVersion string             `json:"requestedVersion"`
	Version          string             `json:"version"`
	Image            string             `json:"image"`
	DirURL           string             `json:"dirUrl"`
	VersionTxt       string             `json:"versionTxtUrl"`
	Artifacts        []release.Artifact `json:"artifacts"`
	// With a Kubernetes version: what it resolves to and the downloads a build would make.
	KubernetesRequested string            `json:"kubernetesRequested,omitempty"`
	KubernetesVersion   string            `json:"kubernetesVersion,omitempty"`
	KubernetesDownloads []kubernetes.File `json:"kubernetesDownloads,omitempty"`
}

// Describe checks o, resolves the release (a pinned version is checked to exist) and, when
// asked, the Kubernetes version.
func Describe(ctx context.Context, o DescribeOptions) (*Description, error) {
	rel, ko := o.Release, o.Kubernetes
	if err := validateSource(&rel, o.Image, &o.Network); err != nil {
		return nil, err
	}
	ko.Arch = rel.Arch
	k := ko // validated (the mirrors also when no version is asked); ko keeps what was asked
	if err := k.Validate(); err != nil {
		return nil, err
	}
	c := httpx.New(o.Network)
	resolved, err := Resolve(ctx, c, rel)
	if err != nil {
		return nil, err
	}
	d := &Description{Channel: resolved.Channel, Arch: resolved.Arch, RequestedVersion: rel.Version,
		Version: resolved.Version, Image: o.Image, DirURL: resolved.DirURL(), VersionTxt: resolved.URL(release.VersionFile)}
	for _, comp := range []string{release.CompressionNone, release.CompressionBzip2} {
		d.Artifacts = append(d.Artifacts, resolved.Artifact(release.ImageFile(o.Image, comp)))
	}
	if ko.Kubernetes != "" {
		d.KubernetesRequested = ko.Kubernetes
		if err := k.Resolve(ctx, c); err != nil {
			return nil, err
		}
		d.KubernetesVersion, d.KubernetesDownloads = k.Kubernetes, k.Files()
	}
	return d, nil
}

// Resolve turns an alias (current, current-YYYY) into the release number named by the server's
// version.txt, and checks that a pinned version exists on the server. The returned release always
// carries a number, so every later URL points into that version's own directory.
func Resolve(ctx context.Context, c *httpx.Client, r release.Release) (release.Release, error) {
	if err := r.Validate(); err != nil {
		return r, err
	}
	url := r.URL(release.VersionFile)
	b, err := c.GetSmall(ctx, url, 64<<10)
	switch {
	case httpx.IsNotFound(err) && release.IsAlias(r.Version):
		return r, fmt.Errorf("the %s channel has no %q release for %s on this server: %w", r.Channel, r.Version, r.Arch, err)
	case httpx.IsNotFound(err):
		return r, fmt.Errorf("version %s does not exist on the %s channel for %s: %w", r.Version, r.Channel, r.Arch, err)
	case err != nil:
		return r, fmt.Errorf("cannot resolve %s %s: %w", r.Channel, r.Version, err)
	}
	v, err := release.ParseVersionTxt(bytes.NewReader(b))
	if err != nil {
		return r, fmt.Errorf("%s: %w", url, err)
	}
	if !release.IsAlias(r.Version) && v != r.Version {
		return r, fmt.Errorf("%s names version %s, not the requested %s", url, v, r.Version)
	}
	r.Version = v
	return r, nil
}
