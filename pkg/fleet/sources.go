package fleet

import (
	"context"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// glanceCatalog is the Catalog and Remover of real clouds, one connection per cloud name.
type glanceCatalog struct {
	mu     sync.Mutex
	clouds map[string]*glance.Cloud
	// Unsure collects, per cloud, tool-tagged images whose slot could not be told.
	Unsure map[string][]Image
}

func (g *glanceCatalog) connect(ctx context.Context, name string) (*glance.Cloud, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clouds[name]; ok {
		return c, nil
	}
	c, err := glance.Connect(ctx, name)
	if err != nil {
		return nil, err
	}
	if g.clouds == nil {
		g.clouds = map[string]*glance.Cloud{}
	}
	g.clouds[name] = c
	return c, nil
}

// Images lists the tool's images in one cloud, hidden ones included.
func (g *glanceCatalog) Images(ctx context.Context, cloud string) ([]Image, error) {
	c, err := g.connect(ctx, cloud)
	if err != nil {
		return nil, err
	}
	raw, err := glance.ListToolImages(ctx, c, true)
	if err != nil {
		return nil, err
	}
	var out, unsure []Image
	for _, img := range raw {
		if im, ok := imageFromGlance(cloud, img); ok {
			out = append(out, im)
		} else {
			unsure = append(unsure, im)
		}
	}
	g.mu.Lock()
	if g.Unsure == nil {
		g.Unsure = map[string][]Image{}
	}
	g.Unsure[cloud] = unsure
	g.mu.Unlock()
	return out, nil
}

// Delete removes an image.
func (g *glanceCatalog) Delete(ctx context.Context, cloud, id string) error {
	c, err := g.connect(ctx, cloud)
	if err != nil {
		return err
	}
	return glance.DeleteImage(ctx, c, id)
}

// Hide sets os_hidden on an image.
func (g *glanceCatalog) Hide(ctx context.Context, cloud, id string) error {
	c, err := g.connect(ctx, cloud)
	if err != nil {
		return err
	}
	return glance.HideImage(ctx, c, id)
}

// releaseResolver asks the release server for each channel's current version, as `release`
// does, and resolves Kubernetes specs (stable, 1.35, v1.35.2) through the mirror's marker files,
// as build does.
type releaseResolver struct {
	Client       *httpx.Client
	Server, Arch string
	Mirror       string // Kubernetes release mirror (default dl.k8s.io's)
}

// Flatcar resolves "current" on the channel.
func (r releaseResolver) Flatcar(ctx context.Context, channel string) (string, error) {
	rel, err := fetch.Resolve(ctx, r.Client, release.Release{Server: r.Server, Channel: channel, Arch: r.Arch, Version: release.Current})
	if err != nil {
		return "", err
	}
	return rel.Version, nil
}

// Kubernetes resolves a version spec.
func (r releaseResolver) Kubernetes(ctx context.Context, spec string) (string, error) {
	return kubernetes.ResolveVersion(ctx, r.Client, r.Mirror, spec)
}
