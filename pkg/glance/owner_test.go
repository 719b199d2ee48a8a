package glance_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// The upload owner mark is a Glance property, which everyone reads on a public image: it is a
// random token, never the host name or the pid (it used to be "<host> <pid> <start>"), and each
// run has its own.
func TestUploadOwnerIsARandomToken(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	host, _ := os.Hostname()
	seen := map[string]bool{}
	for i, name := range []string{"one", "two"} {
		r := uploadCLI(t, rawImage(t, t.TempDir(), int64(50+i), 1<<20), name, glance.Reuse)
		reportedID(t, r)
		var out []glance.Result
		json.Unmarshal([]byte(r.Stdout), &out)
		tok := out[0].Properties[glance.PropertyUploadOwner]
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tok) || strings.Contains(tok, host) || seen[tok] {
			t.Errorf("%s = %q, want a fresh 32-hex token without the host name %q", glance.PropertyUploadOwner, tok, host)
		}
		seen[tok] = true
	}
}

// With a token instead of host and pid, a run still tells another live run's upload in flight
// (waited for) from a dead run's leftover (removed at once).
func TestUploadTellsALiveOwnerFromADeadOne(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	file := rawImage(t, t.TempDir(), 52, 1<<20)

	alive := f.PutFor(map[string]any{glance.PropertyUploadOwner: glance.SelfOwner(t)}, "live", "queued", nil, glance.ToolTag)
	r := uploadCLI(t, file, "live", glance.Reuse, "--wait", "2s")
	if id := reportedID(t, r); id == alive || !strings.Contains(r.Stderr, "another run is uploading") || !strings.Contains(r.Stderr, "taken for a dead run's leftover") {
		t.Errorf("upload did not wait for the live run's upload %s:\n%s", alive, r.Stderr)
	}

	const deadToken = "0123456789abcdef0123456789abcdef"
	lock := filepath.Join(os.TempDir(), "flatcar-capo-upload-"+deadToken+".lock") // left by a killed run, unlocked
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(lock) })
	dead := f.PutFor(map[string]any{glance.PropertyUploadOwner: deadToken}, "dead", "queued", nil, glance.ToolTag)
	r = uploadCLI(t, file, "dead", glance.Reuse, "--wait", "1m")
	reportedID(t, r)
	if strings.Contains(r.Stderr, "another run is uploading") || !strings.Contains(r.Stderr, "removed leftover image "+dead) {
		t.Errorf("upload did not remove the dead run's leftover %s at once:\n%s", dead, r.Stderr)
	}
}
