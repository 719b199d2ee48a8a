package glance

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// Properties that say which fleet slot an image fills (set on upload from the build record), so
// plan and prune group images without guessing from names.
const (
	PropertyChannel = "flatcar_channel"
	PropertyMethod  = "flatcar_capo_method"
)

// ListToolImages lists the images this tool uploaded (tagged ToolTag), the os_hidden ones too
// when hidden is true (Glance leaves them out of a default list).
func ListToolImages(ctx context.Context, c *Cloud, hidden bool) ([]images.Image, error) {
	all := []images.Image{}
	hiddens := []bool{false}
	if hidden {
		hiddens = append(hiddens, true)
	}
	for _, h := range hiddens {
		pages, err := images.List(c.Image, images.ListOpts{Tags: []string{ToolTag}, Hidden: h}).AllPages(ctx)
		if err != nil {
			return nil, glanceError(c, "listing the images tagged "+ToolTag, err)
		}
		some, err := images.ExtractImages(pages)
		if err != nil {
			return nil, fmt.Errorf("listing the images tagged %s at %s: %w", ToolTag, c.Image.Endpoint, err)
		}
		all = append(all, some...)
	}
	return all, nil
}

// HideImage sets os_hidden: the image stays bootable by ID (and by running clusters) but is left
// out of default lists, so CAPO's name filter and new users stop finding it.
func HideImage(ctx context.Context, c *Cloud, id string) error {
	_, err := images.Update(ctx, c.Image, id, images.UpdateOpts{images.ReplaceImageHidden{NewHidden: true}}).Extract()
	if err != nil {
		return glanceError(c, "hiding image "+id, err)
	}
	return nil
}

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
