package record

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Records older builds wrote (testdata: the demo's packer and sysext records, and one with every
// field set, each written by the build before the record had a package of its own) read with
// every value and are written back byte for byte: a field renamed, retagged, reordered or lost
// would change the bytes that upload, manifests, verify and the signatures over them rely on.
func TestRecordsOlderBuildsWroteReadAndWriteTheSameBytes(t *testing.T) {
	files, err := filepath.Glob("testdata/*.qcow2.build.json")
	if err != nil || len(files) != 4 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	dir := t.TempDir()
	for _, f := range files {
		artifact := strings.TrimSuffix(f, ".build.json")
		r, err := Read(artifact)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out := filepath.Join(dir, filepath.Base(artifact))
		if err := r.Write(out); err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(f)
		if got, _ := os.ReadFile(Path(out)); !bytes.Equal(got, want) {
			t.Errorf("%s written back differs:\n%s", f, got)
		}
	}
	full, err := Read("testdata/full.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	if full.Base.SBOM == nil || full.Base.SBOM.SHA512 != "bb" || full.SBOM == nil || full.SBOM.SHA256 != "gg" || len(full.Images) != 1 ||
		full.Images[0].Digest != "sha256:ff" || len(full.Glance) != 1 || full.Glance[0].ID != "id-1" || full.Inputs.Containerd != "2.1.5 runc v1.3.0" ||
		len(full.CarriesSecrets) != 1 || !full.Base.MBRReplaced || full.Tools.BuildVMConfig != "fw_cfg" {
		t.Errorf("the full record read without some of its values: %+v", full)
	}
}

// The inputs key is the one older builds wrote, so their artifacts are reused: computed from the
// same inputs, with and without what is hashed but never stored, it is the key they recorded.
func TestInputsKeyIsUnchanged(t *testing.T) {
	full, err := Read("testdata/full.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	// The full record's key was made with a proxy password and two build-host paths.
	if got := full.Inputs.Key("proxy-password", []string{"/build/host/base.img", "/other"}); got != full.InputsKey {
		t.Errorf("key %s, the record's %s", got, full.InputsKey)
	}
	if got, want := full.Inputs.Key("", nil), "aff6a153249e2a5c7cce803cb6c6472ee4426b72cd658de3fe42cb69666ae284"; got != want {
		t.Errorf("key without secrets or paths %s, want %s", got, want)
	}
	for _, f := range []string{"testdata/packer.qcow2", "testdata/sysext.qcow2"} {
		r, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Inputs.Key("", nil); got != r.InputsKey {
			t.Errorf("%s: key %s, the record's %s", f, got, r.InputsKey)
		}
	}
}

// The record tells Glance an image boots only with UEFI when it is arm64 or was built from the
// qemu_uefi base (by --base, or a --base-image of that name); a missing record is an empty one.
func TestRecordGlanceValues(t *testing.T) {
	for _, tc := range []struct {
		rec  Record
		want bool
	}{
		{Record{Arch: "amd64"}, false},
		{Record{Arch: "arm64"}, true},
		{Record{Arch: "amd64", Inputs: Inputs{Base: "qemu_uefi"}}, true},
		{Record{Arch: "amd64", Base: BaseImage{File: "/x/flatcar_production_qemu_uefi_image.img"}}, true},
	} {
		if got := tc.rec.UEFIOnly(); got != tc.want {
			t.Errorf("%+v: UEFI only %v", tc.rec, got)
		}
	}
	dir := t.TempDir()
	if r, err := Load(filepath.Join(dir, "none.qcow2")); err != nil || r.FlatcarVersion != "" {
		t.Fatalf("missing record: %+v, %v", r, err)
	}
	bad := filepath.Join(dir, "bad.qcow2")
	if err := os.WriteFile(Path(bad), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "is not a valid build record") {
		t.Fatalf("broken record: %v", err)
	}
}

// The files --sign-key signs and verify checks: the image, its record and the SBOM the record
// names, always beside the artifact whatever path the record gives.
func TestSignedFilesFollowTheRecordsSBOM(t *testing.T) {
	artifact := filepath.Join("out", "x.qcow2")
	if got := (&Record{}).SignedFiles(artifact); len(got) != 2 || got[1] != "out/x.qcow2.build.json" {
		t.Errorf("no SBOM: %v", got)
	}
	r := &Record{SBOM: &SBOMFile{File: "/elsewhere/x.qcow2.cdx.json"}}
	if got := r.SignedFiles(artifact); len(got) != 3 || got[0] != artifact || got[2] != "out/x.qcow2.cdx.json" {
		t.Errorf("with an SBOM: %v", got)
	}
	if got := (&Record{SBOM: &SBOMFile{}}).SignedFiles(artifact); len(got) != 2 {
		t.Errorf("an SBOM without a file: %v", got)
	}
}
