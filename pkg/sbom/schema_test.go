package sbom

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// validateCycloneDX checks a BOM against CycloneDX's own JSON schema 1.6 (testdata, with the
// SPDX and JSF schemas it refers to) with python3-jsonschema; it returns the violations.
const validateCycloneDX = `
import json, os, sys
from jsonschema import Draft7Validator, FormatChecker, RefResolver
d = sys.argv[1]
store = {}
for f in os.listdir(d):
    if f.endswith(".json"):
        s = json.load(open(os.path.join(d, f)))
        store[s["$id"]] = s
main = store["http://cyclonedx.org/schema/bom-1.6.schema.json"]
v = Draft7Validator(main, resolver=RefResolver.from_schema(main, store=store), format_checker=FormatChecker())
errs = sorted(v.iter_errors(json.load(sys.stdin)), key=str)
for e in errs:
    print(list(e.absolute_path), e.message)
sys.exit(1 if errs else 0)
`

func schemaErrors(t *testing.T, bom []byte) (bool, string) {
	t.Helper()
	c := exec.Command("/usr/bin/python3", "-c", validateCycloneDX, "testdata/cyclonedx-schema")
	c.Stdin = bytes.NewReader(bom)
	out, err := c.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && (!ok || c.ProcessState.ExitCode() != 1) {
		t.Fatalf("python3 jsonschema: %v\n%s", err, out)
	}
	return err == nil, string(out)
}

// Every kind of component the SBOM writes validates against CycloneDX's schema, and the
// validator does refuse a wrong BOM (so a pass means something).
func TestSBOMValidatesAgainstCycloneDXSchema(t *testing.T) {
	testutil.RequireTools(t, "python3")
	testutil.RequireEnv(t, exec.Command("/usr/bin/python3", "-c", "import jsonschema").Run(), "python3-jsonschema (scripts/install-deps.sh test)")
	inv := sample()
	inv.Files = append(inv.Files, File{Name: "bridge", SHA256: strings.Repeat("77", 32), Path: "/opt/cni/bin/bridge"})
	inv.Sysexts[0].Path = "/opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw"
	inv.Flatcar.SBOM = &Ref{URL: "https://stable.release.flatcar-linux.net/amd64-usr/4459.2.0/flatcar_production_image_sbom.json",
		SHA512: strings.Repeat("ab", 64), Verified: true} // Flatcar's SBOM, an external reference of type bom
	b, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if ok, out := schemaErrors(t, b); !ok {
		t.Fatalf("the SBOM violates CycloneDX 1.6:\n%s\n%s", out, b)
	}
	bad := bytes.Replace(b, []byte(`"type": "container"`), []byte(`"type": "docker-image"`), 1)
	if ok, _ := schemaErrors(t, bad); ok {
		t.Fatal("the schema check accepts a component of type docker-image")
	}
}
