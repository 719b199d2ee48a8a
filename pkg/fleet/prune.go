package fleet

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// Prune actions.
const (
	Keep      = "keep"
	Delete    = "delete"
	Hide      = "hide"
	Protected = "protected" // named by a --protect file: never touched
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

// Decide keeps the newest keep images of every slot in every cloud and marks the rest for
// removal (delete, or hide when hide is set). The newest are kept whether hidden or not (prune
// never unhides); protected images stay but do not take a newer image's place.
func Decide(imgs []Image, unsure []Image, keep int, hide bool, protect *ProtectSet) []Decision {
	type key struct {
		cloud string
		slot  Slot
	}
	groups := map[key][]Image{}
	var keys []key
	for _, im := range imgs {
		k := key{im.Cloud, im.Slot}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], im)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].cloud != keys[j].cloud {
			return keys[i].cloud < keys[j].cloud
		}
		return keys[i].slot.String() < keys[j].slot.String()
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
				d.Action, d.Reason = Protected, "named in "+protect.Where(im)
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
		out = append(out, Decision{Image: im, Action: Unsure, Reason: "no channel/method/version property and not a build-named image"})
	}
	return out
}

// Remover carries out a decision in one cloud.
type Remover interface {
	Delete(ctx context.Context, cloud, id string) error
	Hide(ctx context.Context, cloud, id string) error
}

// Apply carries out the delete and hide decisions; every failure is kept and the rest go on.
func Apply(ctx context.Context, ds []Decision, r Remover) error {
	var errs []error
	for i := range ds {
		d := &ds[i]
		var err error
		switch d.Action {
		case Delete:
			err = r.Delete(ctx, d.Cloud, d.ID)
		case Hide:
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
