package glance_test

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// A reuse run sees image X; before it reports X, a concurrent --on-exists replace run deletes X
// and leaves its own image Y. The reuse run used to report X, an ID that no longer existed; now
// it notices, looks again, and reuses Y when Y holds the same content, or refuses Y (naming it)
// when it does not.
func TestReuseNoticesAConcurrentReplace(t *testing.T) {
	for _, c := range []struct {
		name   string
		same   bool
		wantOK bool
	}{{"same content", true, true}, {"different content", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			f := glancetest.New(t)
			glancetest.CloudsYAML(t, f)
			req, data := fakeRequest(t, "flatcar", 41, glance.Reuse)
			x := f.Put("flatcar", "active", data, glance.ToolTag)
			replacement := data
			if !c.same {
				replacement = append([]byte{}, data...)
				replacement[0] ^= 0xff
			}
			var y string
			var once sync.Once
			f.OnList(func() {
				once.Do(func() { // right after the reuse run's listing: the replace run finishes
					y = f.Put("flatcar", "active", replacement, glance.ToolTag)
					f.Remove(x)
				})
			})
			res, err := uploadFake(t, req, "fake0")
			if !c.wantOK {
				if err == nil || !strings.Contains(err.Error(), y) || !strings.Contains(err.Error(), "different content") {
					t.Fatalf("err %v, want the replacement %s refused for its different content", err, y)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].ID != y || res[0].Action != "reused" {
				t.Fatalf("result %+v, want %s reused (x was %s)", res[0], y, x)
			}
			if got := f.Named("flatcar"); len(got) != 1 || got[y] != "active" {
				t.Fatalf("images: %v", got)
			}
		})
	}
}

// uploadCLI runs `flatcar-capo upload` against the fake clouds of glancetest.CloudsYAML.
func uploadCLI(t *testing.T, file, name string, mode glance.OnExists, extra ...string) testutil.Result {
	t.Helper()
	return testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"upload", file, "--name", name, "--cloud", "fake0", "--on-exists", string(mode), "-o", "json"}, extra...),
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + os.Getenv("OS_CLIENT_CONFIG_FILE")}, Timeout: 2 * time.Minute})
}

func reportedID(t *testing.T, r testutil.Result) string {
	t.Helper()
	r.MustSucceed(t)
	var out []glance.Result
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil || len(out) != 1 {
		t.Fatalf("report %q: %v", r.Stdout, err)
	}
	return out[0].ID
}

// A reuse run and a replace run of one name at once, with the same content. They used to order
// the images by different rules (reuse the earliest, replace the latest), so they deleted each
// other's copies (no image left) or kept both, and exited 0 naming IDs that no longer existed;
// a replace run that waited for the reuse run's upload in flight deleted it right after the
// reuse run reported it. Now one rule for every run: one image stays and both report it.
func TestReuseAndReplaceConvergeOnOneImage(t *testing.T) {
	file := rawImage(t, t.TempDir(), 45, 1<<20)
	check := func(t *testing.T, f *glancetest.Cloud, name string, rs ...testutil.Result) {
		t.Helper()
		left := f.Named(name)
		for _, r := range rs {
			if id := reportedID(t, r); left[id] != "active" {
				t.Errorf("a run reported %s, but Glance holds %v", id, left)
			}
		}
		if len(left) != 1 {
			t.Errorf("Glance holds %v, want exactly one image of %q", left, name)
		}
	}
	for _, first := range []glance.OnExists{glance.Reuse, glance.Replace} {
		second := glance.Replace
		if first == glance.Replace {
			second = glance.Reuse
		}
		t.Run(string(first)+" first, "+string(second)+" while it uploads", func(t *testing.T) {
			f := glancetest.New(t)
			glancetest.CloudsYAML(t, f)
			// The first run's upload stays in flight until the second run has listed the
			// images: on a loaded machine the second binary can take longer to start than
			// any fixed delay, and would then see a finished image, which replace rightly
			// replaces (two runs one after the other, not the race this test is about).
			gate := make(chan struct{})
			var open sync.Once
			f.OnList(func() {
				if len(f.Named("flatcar")) > 0 {
					open.Do(func() { close(gate) })
				}
			})
			f.Misbehave(glancetest.Hostile{UploadDelay: 2 * time.Second, UploadGate: gate})
			done := make(chan testutil.Result)
			go func() { done <- uploadCLI(t, file, "flatcar", first) }()
			for len(f.Named("flatcar")) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			r2 := uploadCLI(t, file, "flatcar", second)
			check(t, f, "flatcar", <-done, r2)
		})
		t.Run(string(first)+" and "+string(second)+" together", func(t *testing.T) {
			f := glancetest.New(t)
			glancetest.CloudsYAML(t, f)
			// Neither upload finishes before both runs have listed the images (one list each
			// before they create theirs): a run that starts late on a loaded machine would
			// otherwise find the other's image finished, and the two would run one after the
			// other instead of together.
			gate := make(chan struct{})
			var lists atomic.Int32
			f.OnList(func() {
				if lists.Add(1) == 2 {
					close(gate)
				}
			})
			f.Misbehave(glancetest.Hostile{UploadDelay: time.Second, UploadGate: gate})
			done := make(chan testutil.Result)
			go func() { done <- uploadCLI(t, file, "flatcar", first) }()
			r2 := uploadCLI(t, file, "flatcar", second)
			check(t, f, "flatcar", <-done, r2)
		})
	}
}
