package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// PruneRequest is `prune`'s: the fleet file and the flags laid over it (Flags.Keep included),
// delete or hide, and the files naming images in use.
type PruneRequest struct {
	ConfigFile string
	Flags      Config
	Yes, Hide  bool
	// KeepGiven says --keep was given: then 0 or less is refused, not taken for the default.
	KeepGiven bool
	Protect   []string
	// Images is where the images are listed and removed; nil: the clouds' Glance.
	Images PruneCatalog
}

// PruneCatalog lists a cloud's images, those whose slot it could not tell, and removes them.
type PruneCatalog interface {
	catalog
	remover
	UnsureImages() map[string][]Image
}

// PruneReport is what prune decided and did; its JSON is `prune -o json`.
type PruneReport struct {
	DryRun    bool       `json:"dryRun"`
	Decisions []Decision `json:"images"`
	Errors    []string   `json:"errors"`
}

// Prune loads and checks the request, lists every cloud's images, decides and (unless a dry
// run) applies. A cloud that fails is in the report and in the error, and the others go on:
// the report is nil only when nothing was looked at.
func Prune(ctx context.Context, r PruneRequest) (*PruneReport, error) {
	if r.KeepGiven && r.Flags.Keep < 1 {
		// Keeping none would delete the image CAPO finds by name for every new node of a slot.
		return nil, errs.Invalidf("--keep %d: prune keeps at least the newest image of each slot, so --keep must be 1 or more; to remove a slot's last image, delete it by ID (openstack image delete ID)", r.Flags.Keep)
	}
	c, err := loadMerged(r.ConfigFile, r.Flags)
	if err != nil {
		return nil, err
	}
	opts := pruneOptions{Config: c, Yes: r.Yes, Hide: r.Hide}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c = opts.Config
	prot, err := loadProtect(r.Protect)
	if err != nil {
		return nil, err
	}
	cat := r.Images
	if cat == nil {
		cat = &glanceCatalog{}
	}
	var imgs, unsure []Image
	var errs []error
	for _, cl := range c.Clouds {
		some, err := cat.Images(ctx, cl)
		unsure = append(unsure, cat.UnsureImages()[cl]...)
		if err != nil {
			errs = append(errs, fmt.Errorf("cloud %s: %w", cl, err))
			continue
		}
		imgs = append(imgs, filterImages(some, c, opts.Versions)...)
	}
	ds := decide(imgs, unsure, c.Keep, r.Hide, prot)
	if !opts.DryRun() {
		if err := apply(ctx, ds, cat); err != nil {
			errs = append(errs, err)
		}
	}
	rep := &PruneReport{DryRun: opts.DryRun(), Decisions: ds, Errors: []string{}}
	if rep.Decisions == nil {
		rep.Decisions = []Decision{}
	}
	for _, e := range errs {
		rep.Errors = append(rep.Errors, e.Error())
	}
	return rep, errors.Join(errs...)
}

// loadMerged is the fleet file (if any) with the flags laid over it, not yet validated.
func loadMerged(file string, flags Config) (Config, error) {
	var c Config
	if file != "" {
		var err error
		if c, err = LoadConfig(file); err != nil {
			return c, err
		}
	}
	return c.Merge(flags), nil
}

// filterImages keeps the images of the channels and methods asked for (every one when the
// user named none) and, when versions were named, of their Kubernetes minors.
func filterImages(imgs []Image, c Config, versions []string) []Image {
	minors := map[string]bool{}
	for _, v := range versions {
		if m := minor(v); m != "" {
			minors[m] = true
		}
	}
	var out []Image
	for _, im := range imgs {
		if slices.Contains(c.Channels, im.Slot.Channel) && slices.Contains(c.Methods, im.Slot.Method) && (len(minors) == 0 || minors[im.Slot.Minor]) {
			out = append(out, im)
		}
	}
	return out
}
