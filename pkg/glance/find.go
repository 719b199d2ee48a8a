package glance

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// CountActiveImages counts the active images matching name and every tag, as CAPO's image filter
// does (it needs exactly one).
func CountActiveImages(ctx context.Context, c *Cloud, name string, tags []string) (int, error) {
	all, err := activeImages(ctx, c, name, tags)
	return len(all), err
}

// MinDiskOfImages is the largest min_disk (GiB) of the active images matching name and tags.
func MinDiskOfImages(ctx context.Context, c *Cloud, name string, tags []string) (int, error) {
	all, err := activeImages(ctx, c, name, tags)
	if err != nil {
		return 0, err
	}
	m := 0
	for _, img := range all {
		m = max(m, img.MinDiskGigabytes)
	}
	return m, nil
}

// activeImages lists the active images matching name and every tag.
func activeImages(ctx context.Context, c *Cloud, name string, tags []string) ([]images.Image, error) {
	opts := images.ListOpts{Name: name, Status: images.ImageStatusActive, Tags: tags}
	return list(ctx, c, opts, fmt.Sprintf("listing the images named %q", name))
}
