package fetch

import (
	"context"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

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
