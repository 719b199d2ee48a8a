package glance_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance/glancetest"
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
