package fleet

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// pruneCatalog is a PruneCatalog of fixed images per cloud; a cloud named "down" fails.
type pruneCatalog struct {
	fakeRemover
	images, unsure map[string][]Image
}

func (p *pruneCatalog) Images(_ context.Context, cloud string) ([]Image, error) {
	if cloud == "down" {
		return nil, errors.New("HTTP 503")
	}
	return p.images[cloud], nil
}
func (p *pruneCatalog) UnsureImages() map[string][]Image { return p.unsure }

// Prune is `prune` in one call: the flags narrow what is considered, a dry run removes
// nothing, --yes removes the rest, and a failing cloud is reported while the others go on.
func TestPruneNarrowsDecidesApplies(t *testing.T) {
	cat := func() *pruneCatalog {
		return &pruneCatalog{images: map[string][]Image{"east": {
			img("east", "old", "stable", "4459.2.0", "v1.35.2", "sysext", 1),
			img("east", "new", "stable", "4459.2.1", "v1.35.2", "sysext", 2),
			img("east", "beta", "beta", "4487.1.0", "v1.35.2", "sysext", 3),
			img("east", "k34", "stable", "4459.2.0", "v1.34.6", "sysext", 4),
		}}, unsure: map[string][]Image{"east": {{Cloud: "east", ID: "odd", Name: "odd"}}}}
	}
	actions := func(rep *PruneReport) map[string]string {
		got := map[string]string{}
		for _, d := range rep.Decisions {
			got[d.ID] = d.Action
		}
		return got
	}
	c := cat()
	rep, err := Prune(context.Background(), PruneRequest{Flags: Config{Clouds: []string{"east"}, Channels: []string{"stable"}, KubernetesVersions: []string{"v1.35.0"}}, Images: c})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"old": Delete, "new": Keep, "odd": Unsure}; !rep.DryRun || !reflect.DeepEqual(actions(rep), want) || len(c.calls) != 0 {
		t.Errorf("dry run: %v (dry %v), calls %v; want %v and nothing removed", actions(rep), rep.DryRun, c.calls, want)
	}

	c = cat()
	rep, err = Prune(context.Background(), PruneRequest{Flags: Config{Clouds: []string{"east", "down"}}, Yes: true, Images: c})
	if err == nil || !strings.Contains(err.Error(), "cloud down: HTTP 503") || len(rep.Errors) != 1 {
		t.Fatalf("a failing cloud: err %v, report errors %v; want it named in both", err, rep.Errors)
	}
	if !reflect.DeepEqual(c.calls, []string{"delete east old"}) {
		t.Errorf("--yes removed %v, want only east's old stable v1.35 image", c.calls)
	}

	if rep, err = Prune(context.Background(), PruneRequest{Flags: Config{Clouds: []string{"east"}}, Yes: true, Hide: true, Images: cat()}); rep != nil || !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("--yes --hide: %v, %v; want no report and an invalid-input error", rep, err)
	}
	if rep, err = Prune(context.Background(), PruneRequest{Images: cat()}); rep != nil || !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("no cloud: %v, %v; want no report and an invalid-input error", rep, err)
	}
}
