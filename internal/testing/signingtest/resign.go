package signingtest

import (
	"os"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// ResignSBOM writes b as the SBOM artifact's build record names and signs it again with keyPath;
// withRecord names its new sha256 in the record and signs the record again too, so every
// signature verifies whatever the SBOM now says.
func ResignSBOM(t testing.TB, artifact, keyPath string, b []byte, withRecord bool) {
	t.Helper()
	key, err := signing.LoadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.Read(artifact)
	if err != nil || rec.SBOM == nil {
		t.Fatalf("record: %+v %v", rec, err)
	}
	sbomPath := rec.SBOMPath(artifact)
	if err := os.WriteFile(sbomPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	files := []string{sbomPath}
	if withRecord {
		sum, _, _ := digest.SHA256(sbomPath)
		path := record.Path(artifact)
		data, _ := os.ReadFile(path)
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), rec.SBOM.SHA256, sum, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	for _, f := range files {
		if _, err := signing.SignFile(key, f); err != nil {
			t.Fatal(err)
		}
	}
}
