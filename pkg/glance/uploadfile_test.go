package glance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// UploadFile is `upload` in one call: the values of the record beside the file and the flags
// become the image's metadata, and the bad values are refused before any cloud is asked.
func TestUploadFileMetadataFromRecordAndFlags(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	path := rawImage(t, t.TempDir(), 7, 1<<20)
	rec := record.Record{FlatcarVersion: "4459.2.2", KubernetesVersion: "v1.34.1", Arch: "amd64", Channel: "beta", SBOM: &record.SBOMFile{SHA256: "5b0m"}}
	if err := rec.Write(path); err != nil {
		t.Fatal(err)
	}
	u := glance.FileUpload{File: path, Clouds: []string{"fake0"}, Name: "flatcar-up", OnExists: "reuse", Wait: 30 * time.Second,
		Metadata: glance.MetadataInput{KubernetesVersion: "v1.35.2", Properties: []string{"site=lab"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := glance.UploadFile(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	p := res[0].Properties
	if p["os_version"] != "4459.2.2" || p[glance.PropertyChannel] != "beta" || p[glance.PropertySBOMSHA256] != "5b0m" ||
		p["kubernetes_version"] != "v1.35.2" || p["site"] != "lab" || res[0].Action != "uploaded" {
		t.Errorf("properties %v: want the record's os_version, channel and SBOM sha256, the flag's kubernetes_version and site=lab", p)
	}

	for name, mod := range map[string]func(*glance.FileUpload){
		"no name":   func(u *glance.FileUpload) { u.Name = "" },
		"on-exists": func(u *glance.FileUpload) { u.OnExists = "overwrite" },
		"signing": func(u *glance.FileUpload) {
			u.Signing = func() (*glance.Signing, error) { return nil, errs.Invalidf("--sign-key: bad") }
		},
		"property": func(u *glance.FileUpload) { u.Metadata.Properties = []string{"novalue"} },
	} {
		bad := u
		bad.Name = "flatcar-bad"
		mod(&bad)
		if _, err := glance.UploadFile(ctx, bad); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: err %v, want invalid", name, err)
		}
	}
	if got := f.Named("flatcar-bad"); len(got) != 0 {
		t.Errorf("the refused uploads made images: %v", got)
	}
	if _, err := glance.UploadFile(ctx, glance.FileUpload{File: path + ".missing", Name: "x", OnExists: "reuse", Clouds: []string{"fake0"}}); err == nil || !strings.Contains(err.Error(), ".missing") {
		t.Errorf("a missing file: err %v, want one naming it", err)
	}
}
