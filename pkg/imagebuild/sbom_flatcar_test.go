package imagebuild_test

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// Issue 45 item 8: the SBOM of `build --method sysext` refers to Flatcar's own package SBOM of
// the release (an external reference of type "bom" with its URL and sha512) when the release
// publishes one, verified like the image; a tampered one fails the build; a release without one
// gives an SBOM without the reference. `inspect --sbom-file --flatcar-sbom` refers to a local
// copy by name and sha512, marked unverified.
func TestBuildFlatcarSBOM(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs")
	mirror := kubetest.New(t, kubernetes.Options{})
	dir := t.TempDir()
	base := filepath.Join(dir, "flatcar_production_openstack_image.img")
	// USR-A with the release's os-release: inspect's SBOM has a Flatcar component only then.
	tree := filepath.Join(dir, "usr")
	os.MkdirAll(filepath.Join(tree, "lib"), 0o755)
	os.WriteFile(filepath.Join(tree, "lib", "os-release"), []byte("NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION_ID=4459.2.0\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\n"), 0o644)
	usr := filepath.Join(dir, "usr.ext4")
	testutil.MustRun(t, "mkfs.ext4", "-q", "-F", "-L", "USR-A", "-d", tree, usr, "8M")
	testutil.Run(t, "convert", "--to", "qcow2", flatcardisk.Build(t, flatcardisk.Options{USRAImage: usr}), base).MustSucceed(t)
	content, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	srv := fetchtest.NewServer(t)
	key := fetchtest.NewKey(t, "Test Buildbot", time.Now())
	keyring := filepath.Join(dir, "keyring.asc")
	os.WriteFile(keyring, key.PublicArmored(t), 0o644)
	spdx := standin.SBOM("4459.2.0")
	rel := fetchtest.Release{Channel: "stable", Arch: "amd64", Version: "4459.2.0", Image: "openstack",
		Content: content, Signer: key.Current, Key: key, SignedAt: time.Now().Add(-time.Hour), Current: true, WithoutBZ2: true, SBOM: spdx}
	srv.Publish(t, rel)
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext.qcow2"
	cache := filepath.Join(dir, "cache")
	build := func(out string) testutil.Result {
		t.Helper()
		return testutil.Run(t, append([]string{"build", "--method", "sysext", "--no-preload-images", "--release-server", srv.ReleaseServer(),
			"--keyring", keyring, "--cache-dir", cache, "--output-dir", filepath.Join(dir, out)}, mirror.Args()...)...)
	}
	sum := sha512.Sum512(spdx)
	wantSum := hex.EncodeToString(sum[:])
	wantURL := strings.ReplaceAll(srv.ReleaseServer(), "{channel}", "stable") + "/amd64-usr/4459.2.0/flatcar_production_image_sbom.json"

	build("with").MustSucceed(t)
	artifact := filepath.Join(dir, "with", name)
	rec, err := record.Read(artifact)
	if err != nil {
		t.Fatal(err)
	}
	if s := rec.Base.SBOM; s == nil || s.URL != wantURL || s.SHA512 != wantSum || !s.Verified {
		t.Errorf("record's base.sbom %+v, want %s with sha512 %s, verified", s, wantURL, wantSum[:16])
	}
	ref, verified := flatcarBOMRef(t, artifact+".cdx.json")
	if ref == nil || ref.URL != wantURL || ref.Hashes == nil || (*ref.Hashes)[0].Algorithm != cdx.HashAlgoSHA512 || (*ref.Hashes)[0].Value != wantSum || verified != "true" {
		t.Errorf("the SBOM's reference to Flatcar's SBOM: %+v (verified %q), want %s with its sha512, verified", ref, verified, wantURL)
	}

	// inspect of the built image with a local copy of Flatcar's SBOM: referred to by name, unverified.
	local := filepath.Join(dir, "flatcar_production_image_sbom.json")
	os.WriteFile(local, spdx, 0o644)
	out := filepath.Join(dir, "inspect.cdx.json")
	testutil.Run(t, "inspect", artifact, "--sbom-file", out, "--flatcar-sbom", local).MustSucceed(t)
	ref, verified = flatcarBOMRef(t, out)
	if ref == nil || ref.URL != "flatcar_production_image_sbom.json" || ref.Hashes == nil || (*ref.Hashes)[0].Value != wantSum || verified != "false" {
		t.Errorf("inspect's reference to Flatcar's SBOM: %+v (verified %q), want the file's name and sha512, unverified", ref, verified)
	}
	testutil.Run(t, "inspect", artifact, "--flatcar-sbom", local).MustFail(t, 2, "--sbom-file")
	testutil.Run(t, "inspect", artifact, "--sbom-file", out, "--flatcar-sbom", keyring).MustFail(t, 2, "not an SPDX JSON document")

	// A tampered SBOM on the server fails the build, as a tampered image does.
	srv.Put(rel.SBOMPath(), append(bytes.Clone(spdx), ' '))
	build("tampered").MustFail(t, 1, "flatcar_production_image_sbom.json", "does not match the signed DIGESTS")

	// A release without one still builds; its SBOM has no reference.
	for _, s := range []string{"", ".DIGESTS", ".DIGESTS.asc", ".sig"} {
		srv.Remove(rel.SBOMPath() + s)
	}
	build("without").MustSucceed(t)
	if ref, _ := flatcarBOMRef(t, filepath.Join(dir, "without", name+".cdx.json")); ref != nil {
		t.Errorf("a release without an SBOM gave a reference %+v", ref)
	}
}

// flatcarBOMRef is the Flatcar component's external reference of type "bom" in the SBOM at path,
// and its flatcar-capo:flatcar:sbom:verified property.
func flatcarBOMRef(t *testing.T, path string) (*cdx.ExternalReference, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	for _, c := range *bom.Components {
		if c.BOMRef != "flatcar" {
			continue
		}
		verified := ""
		if c.Properties != nil {
			for _, p := range *c.Properties {
				if p.Name == "flatcar-capo:flatcar:sbom:verified" {
					verified = p.Value
				}
			}
		}
		if c.ExternalReferences != nil {
			for _, r := range *c.ExternalReferences {
				if r.Type == cdx.ERTypeBOM {
					return &r, verified
				}
			}
		}
		return nil, verified
	}
	t.Fatalf("%s has no flatcar component", path)
	return nil, ""
}
