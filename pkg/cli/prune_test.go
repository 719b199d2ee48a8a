package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/fleet"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// The prune tests run `flatcar-capo prune` against the in-process fake Glance, which answers as
// Glance does (owners, visibility, os_hidden, tags, pages) or, asked to, as odd clouds do.

// putSlotImage stores an image of the slot stable/v1.35/sysext at Flatcar version; attrs
// override or add attributes (owner, visibility, os_hidden, name).
func putSlotImage(f *glancetest.Cloud, version string, attrs map[string]any) string {
	a := map[string]any{glance.PropertyChannel: "stable", glance.PropertyMethod: "sysext",
		"os_version": version, "kubernetes_version": "v1.35.2"}
	for k, v := range attrs {
		a[k] = v
	}
	name, _ := a["name"].(string)
	if name == "" {
		name = fleet.ImageName("sysext", "stable", version, "v1.35.2")
	}
	return f.PutFor(a, name, "active", []byte(version), glance.ToolTag)
}

func runPrune(t *testing.T, args ...string) testutil.Result {
	t.Helper()
	return testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"prune", "--cloud", "fake0"}, args...),
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + os.Getenv("OS_CLIENT_CONFIG_FILE")}, Timeout: time.Minute})
}

// pruneJSON runs prune -o json and returns each image's action by ID, failing the test when an
// ID has more than one decision.
func pruneJSON(t *testing.T, args ...string) map[string]string {
	t.Helper()
	res := runPrune(t, append(args, "-o", "json")...).MustSucceed(t)
	var rep fleet.PruneReport
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("prune -o json: %v\n%s", err, res.Stdout)
	}
	got := map[string]string{}
	for _, d := range rep.Decisions {
		if prev, ok := got[d.ID]; ok {
			t.Errorf("image %s decided twice: %s and %s", d.ID, prev, d.Action)
		}
		got[d.ID] = d.Action
	}
	return got
}

func present(f *glancetest.Cloud, ids ...string) []string {
	var out []string
	for _, id := range ids {
		if f.Has(id) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Another project's public image of the same slot and a higher version is listed by Glance; it
// used to become the kept one, and prune --yes deleted both of ours. Only the project's own
// images are grouped, kept or deleted.
func TestPruneLeavesOtherProjectsImagesOut(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	older := putSlotImage(f, "4459.2.0", nil)
	newer := putSlotImage(f, "4459.2.1", nil)
	foreign := putSlotImage(f, "4500.0.0", map[string]any{"owner": "p2", "visibility": "public"})
	shared := putSlotImage(f, "4501.0.0", map[string]any{"owner": "p3", "visibility": "shared"})

	got := pruneJSON(t, "--keep", "1", "--yes")
	want := map[string]string{older: fleet.Delete, newer: fleet.Keep}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decisions %v, want %v (other projects' %s and %s left out)", got, want, foreign, shared)
	}
	if left, want := present(f, older, newer, foreign, shared), []string{newer, foreign, shared}; fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("after prune --yes Glance holds %v, want %v", left, want)
	}
}

// A Glance whose pages overlap and repeat images: every image gets one decision, the kept ones
// stay, and only the older ones go.
func TestPruneOneDecisionPerRepeatedImage(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	var ids []string
	for _, v := range []string{"4459.2.0", "4459.2.1", "4459.2.2", "4459.2.3", "4459.2.4"} {
		ids = append(ids, putSlotImage(f, v, nil))
	}
	hidden := putSlotImage(f, "4400.0.0", map[string]any{"os_hidden": true})
	f.Misbehave(glancetest.Hostile{RepeatIDs: true, PageSize: 2})

	got := pruneJSON(t, "--keep", "2", "--yes")
	want := map[string]string{ids[0]: fleet.Delete, ids[1]: fleet.Delete, ids[2]: fleet.Delete, ids[3]: fleet.Keep, ids[4]: fleet.Keep, hidden: fleet.Delete}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	if left, want := present(f, append(ids, hidden)...), []string{ids[3], ids[4]}; fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("after prune --yes Glance holds %v, want the kept %v", left, want)
	}
}

// A Glance that hands out the same next page again: the listing stops with an error that says
// so, instead of being followed forever, and nothing is deleted.
func TestPruneRefusesARepeatedNextPage(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	var ids []string
	for _, v := range []string{"4459.2.0", "4459.2.1", "4459.2.2", "4459.2.3", "4459.2.4"} {
		ids = append(ids, putSlotImage(f, v, nil))
	}
	f.Misbehave(glancetest.Hostile{RepeatNext: true, PageSize: 2})
	runPrune(t, "--keep", "1", "--yes").MustFail(t, 1, "next page it had already given")
	if left := present(f, ids...); len(left) != len(ids) {
		t.Errorf("after a refused listing Glance holds %v, want all of %v", left, ids)
	}
}

// An image name is anyone's text: its control characters are escaped in the text report, not
// sent to the terminal.
func TestPruneEscapesControlCharacters(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	putSlotImage(f, "4459.2.0", map[string]any{"name": "flatcar\x1b]0;owned\x07\x1b[2J"})
	putSlotImage(f, "4459.2.1", nil)
	out := runPrune(t, "--keep", "1").MustSucceed(t).Stdout
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `"flatcar\x1b]0;owned\a\x1b[2J"`) {
		t.Errorf("prune printed the name's control characters raw or not escaped:\n%q", out)
	}
}

// --keep 0 used to mean 1 silently; keeping none of a slot is refused with the way out.
func TestPruneRefusesKeepZero(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	id := putSlotImage(f, "4459.2.0", nil)
	runPrune(t, "--keep", "0", "--yes").MustFail(t, 2, "--keep must be 1 or more", "openstack image delete")
	if !f.Has(id) {
		t.Error("prune --keep 0 deleted the slot's image")
	}
	// The fleet file's keep: 0 too: it decodes as "not given", which must not mean 1 silently.
	fleetFile := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte("channels: [stable]\nkubernetesVersions: [v1.34.4]\nkeep: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runPrune(t, "--config", fleetFile, "--yes").MustFail(t, 2, "keep: 0", "keep must be 1 or more")
	if !f.Has(id) {
		t.Error("prune with keep: 0 in the fleet file deleted the slot's image")
	}
}
