package inspect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// File is `inspect` in one call: the verdict for --for, the SBOM written beside, and the bad
// values refused before the image is read.
func TestFileVerdictAndSBOM(t *testing.T) {
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	out := filepath.Join(t.TempDir(), "img.cdx.json")
	r, err := File(context.Background(), img, FileOptions{Target: "openstack", SBOMFile: out, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Target != "openstack" || r.Verdict != NotReady {
		t.Errorf("a qemu image for openstack: target %s, verdict %s; want NOT READY", r.Target, r.Verdict)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := sbom.Read(b); err != nil || !strings.Contains(string(b), filepath.Base(img)) {
		t.Errorf("the SBOM at %s: %+v, %v; want one naming the image", out, inv, err)
	}
	if r, err = File(context.Background(), img, FileOptions{}); err != nil || r.Verdict == NotReady || r.Target != "qemu" {
		t.Errorf("for its own oem_id: %+v, %v; want qemu, not NOT READY", r, err)
	}
	for name, o := range map[string]FileOptions{
		"bad target":     {Target: "Open Stack"},
		"sbom is image":  {SBOMFile: img},
		"sbom no parent": {SBOMFile: filepath.Join(t.TempDir(), "missing", "x.json")},
	} {
		if _, err := File(context.Background(), img, o); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: err %v, want invalid", name, err)
		}
	}
	if _, err := File(context.Background(), filepath.Join(t.TempDir(), "none.img"), FileOptions{}); err == nil || !strings.Contains(err.Error(), "none.img") {
		t.Errorf("a missing image: err %v, want one naming it", err)
	}
}
