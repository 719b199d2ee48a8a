package fleet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// Resolver turns a channel into its current Flatcar version and a Kubernetes version spec
// (exact, minor or stable) into an exact version.
type Resolver interface {
	Flatcar(ctx context.Context, channel string) (string, error)
	Kubernetes(ctx context.Context, spec string) (string, error)
}

// catalog lists the images this tool uploaded to one cloud.
type catalog interface {
	Images(ctx context.Context, cloud string) ([]Image, error)
}

// Status of one slot's current image in one cloud.
const (
	Present  = "present"  // an active image of the current name
	Missing  = "missing"  // nothing of this slot
	Stale    = "stale"    // only older images of this slot (an older Flatcar or Kubernetes patch)
	Differs  = "differs"  // the name exists but not with the content of the local build record
	unknown  = "error"    // the cloud could not be asked
	building = "building" // an upload of the name is under way (queued/saving)
)

// CloudState is one cloud's answer for one row.
type CloudState struct {
	Cloud   string `json:"cloud"`
	Status  string `json:"status"`
	ImageID string `json:"imageId,omitempty"`
	Newest  string `json:"newest,omitempty"` // the newest image of the slot, when stale
	Error   string `json:"error,omitempty"`
}

// Row is one build: a channel's current release with one Kubernetes version and one method.
type Row struct {
	Channel           string       `json:"channel"`
	FlatcarVersion    string       `json:"flatcarVersion"`
	KubernetesSpec    string       `json:"kubernetesSpec"`
	KubernetesVersion string       `json:"kubernetesVersion"`
	Method            string       `json:"method"`
	ImageName         string       `json:"imageName"`
	Clouds            []CloudState `json:"clouds"`
}

// Needed lists the clouds that do not have this row's image (errors included: a cloud that
// could not be asked is not known to have it).
func (r Row) Needed() []string {
	var out []string
	for _, c := range r.Clouds {
		if c.Status != Present {
			out = append(out, c.Cloud)
		}
	}
	return out
}

// Result is a plan: every row, and the errors that left some cells unknown.
type Result struct {
	Rows   []Row   `json:"rows"`
	Errors []error `json:"-"`
}

// Err joins the errors (nil when every cloud and version answered).
func (r *Result) Err() error { return errors.Join(r.Errors...) }

// plan resolves every channel and Kubernetes version, asks every cloud once, and sets each
// row's state per cloud. A channel or version that does not resolve is an error that leaves its
// rows out; a cloud that fails marks its cells "error" and the other clouds' cells still count.
func plan(ctx context.Context, c Config, res Resolver, cat catalog) *Result {
	out := &Result{}
	flatcar := out.resolveAll(ctx, "channel", c.Channels, res.Flatcar)
	kube := out.resolveAll(ctx, "kubernetes version", c.KubernetesVersions, res.Kubernetes)
	catalogs := askClouds(ctx, c.Clouds, cat)
	for _, cl := range c.Clouds {
		if err := catalogs[cl].err; err != nil {
			out.Errors = append(out.Errors, fmt.Errorf("cloud %s: %w", cl, err))
		}
	}
	for _, ch := range c.Channels {
		fv, ok := flatcar[ch]
		if !ok {
			continue
		}
		for _, spec := range c.KubernetesVersions {
			kv, ok := kube[spec]
			if !ok {
				continue
			}
			for _, m := range c.Methods {
				row := Row{Channel: ch, FlatcarVersion: fv, KubernetesSpec: spec, KubernetesVersion: kv, Method: m,
					ImageName: ImageName(m, ch, fv, kv)}
				local := localSHA512(c.OutputDir, row.ImageName)
				for _, cl := range c.Clouds {
					row.Clouds = append(row.Clouds, cellState(cl, catalogs[cl], row, local))
				}
				out.Rows = append(out.Rows, row)
			}
		}
	}
	return out
}

// resolveAll resolves every name; one that fails is an error of r and left out of the map.
func (r *Result) resolveAll(ctx context.Context, what string, names []string, resolve func(context.Context, string) (string, error)) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		v, err := resolve(ctx, n)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Errorf("%s %s: %w", what, n, err))
			continue
		}
		out[n] = v
	}
	return out
}

type catalogAnswer struct {
	images []Image
	err    error
}

// askClouds lists every cloud once, in parallel (a fleet spans regions far apart).
func askClouds(ctx context.Context, clouds []string, cat catalog) map[string]catalogAnswer {
	out := make(map[string]catalogAnswer, len(clouds))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, cl := range clouds {
		wg.Go(func() {
			imgs, err := cat.Images(ctx, cl)
			mu.Lock()
			out[cl] = catalogAnswer{imgs, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func cellState(cloud string, a catalogAnswer, row Row, localHash string) CloudState {
	st := CloudState{Cloud: cloud}
	if a.err != nil {
		st.Status, st.Error = unknown, a.err.Error()
		return st
	}
	slot := Slot{Channel: row.Channel, Minor: minor(row.KubernetesVersion), Method: row.Method}
	var same, older []Image
	for _, im := range a.images {
		switch {
		case im.Name == row.ImageName:
			same = append(same, im)
		case im.Slot == slot && !im.Hidden:
			older = append(older, im)
		}
	}
	for _, im := range same {
		if im.Status == "active" {
			st.Status, st.ImageID = Present, im.ID
			if localHash != "" && im.Hash != "" && im.Hash != localHash {
				st.Status = Differs
			}
			return st
		}
	}
	if len(same) > 0 {
		st.Status, st.ImageID = building, same[0].ID
		return st
	}
	if len(older) > 0 {
		sort.Slice(older, func(i, j int) bool { return newer(older[i], older[j]) })
		st.Status, st.Newest = Stale, older[0].Name
		return st
	}
	st.Status = Missing
	return st
}

// localSHA512 is the sha512 of the qcow2 that a build record in dir names for the image, or "".
func localSHA512(dir, name string) string {
	if dir == "" {
		return ""
	}
	for _, artifact := range []string{filepath.Join(dir, name+".qcow2"), filepath.Join(dir, name, name+".qcow2")} {
		rec, err := record.Read(artifact)
		if err != nil {
			continue
		}
		for _, a := range rec.Artifacts {
			if a.File == filepath.Base(artifact) {
				return a.SHA512
			}
		}
	}
	return ""
}

// Todo is the rows some cloud still needs, each with those clouds only.
func (r *Result) Todo() []Row {
	var out []Row
	for _, row := range r.Rows {
		todo := row
		todo.Clouds = slices.DeleteFunc(slices.Clone(row.Clouds), func(c CloudState) bool { return c.Status == Present })
		if len(todo.Clouds) > 0 {
			out = append(out, todo)
		}
	}
	return out
}

// Summary counts the cells by status, for the text report's last line.
func (r *Result) Summary() string {
	n := map[string]int{}
	for _, row := range r.Rows {
		for _, c := range row.Clouds {
			n[c.Status]++
		}
	}
	var parts []string
	for _, s := range []string{Present, Missing, Stale, Differs, building, unknown} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	if len(parts) == 0 {
		return "nothing planned"
	}
	return strings.Join(parts, ", ")
}
