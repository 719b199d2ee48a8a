package verify_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// A record that names an SBOM (as the SBOM work writes it): its .sig is checked too, and a
// changed SBOM fails verify, naming it; and the SBOM is checked against the image, which this one
// (not a disk image) fails, the signatures verifying all the same.
func TestVerifyChecksTheSBOMTheRecordNames(t *testing.T) {
	for _, sbomField := range []string{`{"file": "x.cdx.json", "sha256": "...", "format": "CycloneDX 1.6 JSON"}`} {
		dir := t.TempDir()
		keyPath, signer := signingtest.Key(t, dir, "k.pem", signingtest.RSA3072)
		pub := signingtest.PublicKey(t, dir, "k.pub", signer)
		artifact := filepath.Join(dir, "x.qcow2")
		os.WriteFile(artifact, []byte("not really a qcow2, but signed bytes all the same"), 0o644)
		sum, n, err := digest.SHA512(artifact)
		if err != nil {
			t.Fatal(err)
		}
		sbom := filepath.Join(dir, "x.cdx.json")
		os.WriteFile(sbom, []byte(`{"bomFormat":"CycloneDX"}`), 0o644)
		sbomSum, _, _ := digest.SHA256(sbom)
		rec, _ := json.Marshal(record.Record{ImageName: "x", Artifacts: []record.Artifact{{File: "x.qcow2", Bytes: n, SHA512: sum}}})
		rec = append(rec[:len(rec)-1], []byte(`,"sbom":`+strings.Replace(sbomField, "...", sbomSum, 1)+`}`)...)
		os.WriteFile(record.Path(artifact), rec, 0o644)
		r, err := record.Read(artifact)
		if err != nil {
			t.Fatal(err)
		}
		files := r.SignedFiles(artifact)
		if len(files) != 3 || files[2] != sbom {
			t.Fatalf("SignedFiles: %v", files)
		}
		key, err := signing.LoadKey(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if _, err := signing.SignFile(key, f); err != nil {
				t.Fatal(err)
			}
		}
		ok := testutil.RunCmd(t, testutil.Cmd{Args: []string{"verify", artifact, "--key", pub}}).
			MustFail(t, 1, "the image's contents cannot be read to check them against the SBOM", "no GPT")
		if strings.Count(ok.Stdout, ": verified") != 3 || !strings.Contains(ok.Stdout, "x.cdx.json: verified") || strings.Contains(ok.Combined(), "sha256") {
			t.Fatalf("verify:\n%s", ok.Stdout)
		}
		os.WriteFile(sbom, []byte(`{"bomFormat":"CycloneDX","components":[]}`), 0o644)
		testutil.RunCmd(t, testutil.Cmd{Args: []string{"verify", artifact, "--key", pub}}).MustFail(t, 1, "x.cdx.json: the signature does not verify")
		os.Remove(sbom + ".sig")
		testutil.RunCmd(t, testutil.Cmd{Args: []string{"verify", artifact, "--key", pub}}).MustFail(t, 1, "x.cdx.json: missing")
	}
}
