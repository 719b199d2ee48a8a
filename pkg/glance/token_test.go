package glance_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// Proxies and gateways echo the request's headers in their error pages, X-Auth-Token included:
// the Keystone token is masked like the password wherever an error shows the body, on stderr
// and in -o json.
func TestKeystoneTokenNeverPrinted(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	file := rawImage(t, t.TempDir(), 53, 1<<20)
	// A protected older image of the name: replace cannot delete it (HTTP 403, echoed).
	f.PutFor(map[string]any{"protected": true}, "flatcar", "active", []byte("older, protected"), glance.ToolTag)
	f.Misbehave(glancetest.Hostile{EchoHeaders: true})
	for _, format := range []string{"text", "json"} {
		r := uploadCLI(t, file, "flatcar", glance.Replace, "-o", format)
		if r.Code == 0 || !strings.Contains(r.Combined(), "403") {
			t.Fatalf("-o %s: exit %d, want the refused delete (HTTP 403) reported:\n%s", format, r.Code, r.Combined())
		}
		if strings.Contains(r.Combined(), glancetest.Token) || strings.Contains(r.Combined(), glancetest.Token[:24]) {
			t.Errorf("-o %s: the Keystone token is in the output:\n%s", format, r.Combined())
		}
	}
}
