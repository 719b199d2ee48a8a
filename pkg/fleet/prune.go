package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// Prune actions.
const (
	Keep      = "keep"
	Delete    = "delete"
	Hide      = "hide"
	protected = "protected" // named by a --protect file: never touched
	Unsure    = "unknown"   // tagged by this tool but no slot can be told: never touched
)

// Decision is what prune does (or would do) with one image.
type Decision struct {
	Image
	Action string `json:"action"`
	Reason string `json:"reason"`
	Done   bool   `json:"done"` // the action was carried out (false for keep and a dry run)
	Error  string `json:"error,omitempty"`
}

// decide keeps the newest keep images of every slot in every cloud and marks the rest for
// removal (delete, or hide when hide is set). The newest are kept whether hidden or not (prune
// never unhides); protected images stay but do not take a newer image's place.
//
// Every image gets one decision, however often a listing named it: an image listed twice
// (pages that overlap) would otherwise be kept as the newest and deleted as an older copy.
func decide(imgs []Image, unsure []Image, keep int, hide bool, protect *protectSet) []Decision {
	type key struct {
		cloud string
		slot  Slot
	}
	type imageKey struct{ cloud, id string }
	decided := map[imageKey]bool{}
	once := func(im Image) bool {
		k := imageKey{im.Cloud, im.ID}
		if decided[k] {
			return false
		}
		decided[k] = true
		return true
	}
	groups := map[key][]Image{}
	var keys []key
	for _, im := range imgs {
		if !once(im) {
			continue
		}
		k := key{im.Cloud, im.Slot}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], im)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.cloud, b.cloud), strings.Compare(a.slot.String(), b.slot.String()))
	})
	var out []Decision
	for _, k := range keys {
		g := groups[k]
		sort.Slice(g, func(i, j int) bool { return newer(g[i], g[j]) })
		kept := 0
		for _, im := range g {
			d := Decision{Image: im}
			switch {
			case protect.Has(im):
				d.Action, d.Reason = protected, "named in "+protect.Where(im)
			case im.Status != "active":
				// a queued or saving image may be another pipeline's upload in flight
				d.Action, d.Reason = Keep, "not active ("+im.Status+"): may be an upload in progress"
			case kept < keep:
				kept++
				d.Action, d.Reason = Keep, fmt.Sprintf("newest %d of %s in %s", kept, k.slot, k.cloud)
			case hide && im.Hidden:
				d.Action, d.Reason = Keep, "hidden already"
			case hide:
				d.Action, d.Reason = Hide, fmt.Sprintf("older than the newest %d of %s", keep, k.slot)
			default:
				d.Action, d.Reason = Delete, fmt.Sprintf("older than the newest %d of %s", keep, k.slot)
			}
			out = append(out, d)
		}
	}
	for _, im := range unsure {
		if !once(im) {
			continue
		}
		out = append(out, Decision{Image: im, Action: Unsure, Reason: "no channel/method/version property and not a build-named image"})
	}
	return out
}

// remover carries out a decision in one cloud.
type remover interface {
	Delete(ctx context.Context, cloud, id string) error
	Hide(ctx context.Context, cloud, id string) error
}

// apply carries out the delete and hide decisions; every failure is kept and the rest go on.
// An image that any decision keeps is never removed, whatever another decision says.
func apply(ctx context.Context, ds []Decision, r remover) error {
	type imageKey struct{ cloud, id string }
	stays := map[imageKey]bool{}
	for _, d := range ds {
		if d.Action != Delete && d.Action != Hide {
			stays[imageKey{d.Cloud, d.ID}] = true
		}
	}
	var errs []error
	for i := range ds {
		d := &ds[i]
		var err error
		switch {
		case (d.Action == Delete || d.Action == Hide) && stays[imageKey{d.Cloud, d.ID}]:
			err = fmt.Errorf("the image is also listed as %s: left alone", Keep)
		case d.Action == Delete:
			err = r.Delete(ctx, d.Cloud, d.ID)
		case d.Action == Hide:
			err = r.Hide(ctx, d.Cloud, d.ID)
		default:
			continue
		}
		if err != nil {
			d.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s %s (%s) in %s: %w", d.Action, d.Name, d.ID, d.Cloud, err))
			continue
		}
		d.Done = true
	}
	return errors.Join(errs...)
}

// pruneOptions are prune's choices: the fleet config (clouds, and the channels, methods and
// Kubernetes versions that narrow what is considered) and what to do with the older images.
type pruneOptions struct {
	Config
	Yes  bool // delete the images Decide marks
	Hide bool // set os_hidden on them instead
	// Versions are the Kubernetes versions asked for (comma lists split), set by Validate: nil
	// (every minor) when none was named, since prune, unlike plan, needs none.
	Versions []string
}

// DryRun says nothing is changed: neither Yes nor Hide.
func (o *pruneOptions) DryRun() bool { return !o.Yes && !o.Hide }

// Validate checks o and fills prune's defaults: what the user did not narrow is not narrowed
// (every channel and method), and keep is 1. Its errors wrap errs.ErrInvalid.
func (o *pruneOptions) Validate() error {
	if o.Yes && o.Hide {
		return errs.Invalidf("--yes (delete) and --hide are two ways to prune: choose one")
	}
	c := o.Config
	named := len(splitAll(c.KubernetesVersions)) > 0
	allChannels, allMethods := len(c.Channels) == 0, len(c.Methods) == 0
	if !named {
		c.KubernetesVersions = []string{"any"} // Validate wants one; prune needs none
	}
	if err := c.ValidateClouds(); err != nil {
		return err
	}
	if o.Versions = nil; named {
		o.Versions = c.KubernetesVersions
	}
	if allChannels {
		c.Channels = release.Channels
	}
	if allMethods {
		c.Methods = methods
	}
	c.Keep = cmp.Or(c.Keep, 1)
	o.Config = c
	return nil
}
