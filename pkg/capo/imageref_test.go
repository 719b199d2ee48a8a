package capo

import (
	"context"
	"strings"
	"testing"

	orcv1alpha1 "github.com/k-orc/openstack-resource-controller/v2/api/v1alpha1"
	capov1beta1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
)

// --image-ref id|orc and --image-source: the machine templates decode strictly into CAPO
// v0.14.7's types with the right image reference, the ORC Image into ORC v2.4.0's, and the
// whole manifest lints clean.
func TestImageRefs(t *testing.T) {
	sum := strings.Repeat("ab", 64)
	for _, api := range capiAPIs {
		for _, tc := range []struct {
			name string
			ref  string
			src  *ImageSource
			id   bool
		}{
			{"id", ImageRefID, nil, true},
			{"orc-by-name", ImageRefORC, nil, false},
			{"orc-by-id", ImageRefORC, nil, true},
			{"orc-managed", ImageRefORC, &ImageSource{URL: "http://10.0.0.5/flatcar.qcow2", SHA512: sum, Arch: "arm64", MinDiskGiB: 9, MinRAMMiB: 2048}, false},
		} {
			t.Run(api+"/"+tc.name, func(t *testing.T) {
				values := allValues(t, api)
				if tc.id {
					values[VarImageID] = "6f0c6f5e-0000-4000-8000-000000000001"
				}
				r, err := renderChecked(renderOptions{CAPIAPI: api, Values: values, ImageRef: tc.ref, ImageSource: tc.src})
				if err != nil {
					t.Fatal(err)
				}
				docs, err := ParseDocuments("m", r.Manifest)
				if err != nil {
					t.Fatal(err)
				}
				var templates int
				var orc *orcv1alpha1.Image
				for _, d := range docs {
					v, err := decodeStrict(d)
					if err != nil {
						t.Fatal(err)
					}
					switch o := v.(type) {
					case *capov1beta1.OpenStackMachineTemplate:
						templates++
						img := o.Spec.Template.Spec.Image
						switch {
						case tc.ref == ImageRefID && (img.ID == nil || *img.ID != values[VarImageID]):
							t.Errorf("image %+v, want id", img)
						case tc.ref == ImageRefORC && (img.ImageRef == nil || img.ImageRef.Name != values[VarImageName] || img.Filter != nil):
							t.Errorf("image %+v, want imageRef %s", img, values[VarImageName])
						}
					case *orcv1alpha1.Image:
						orc = o
					}
				}
				if templates != 2 || (orc != nil) != (tc.ref == ImageRefORC) {
					t.Fatalf("%d machine templates, ORC Image %v", templates, orc)
				}
				if orc != nil {
					if orc.Name != values[VarImageName] || orc.Labels[moveLabel] != "true" ||
						orc.Spec.CloudCredentialsRef.SecretName != "demo-cloud-config" {
						t.Errorf("ORC Image metadata/credentials: %+v %+v", orc.ObjectMeta, orc.Spec.CloudCredentialsRef)
					}
					switch {
					case tc.src != nil:
						res := orc.Spec.Resource
						if orc.Spec.ManagementPolicy != orcv1alpha1.ManagementPolicyManaged || orc.Spec.ManagedOptions == nil ||
							orc.Spec.ManagedOptions.OnDelete != orcv1alpha1.OnDeleteDetach || res == nil || res.Content == nil ||
							res.Content.Download.URL != tc.src.URL || res.Content.Download.Hash.Algorithm != orcv1alpha1.ImageHashAlgorithmSHA512 ||
							res.Content.Download.Hash.Value != sum || *res.Properties.MinDiskGB != 9 || *res.Properties.Architecture != "aarch64" {
							t.Errorf("managed ORC Image: %+v", orc.Spec)
						}
					case tc.id:
						if orc.Spec.Import == nil || orc.Spec.Import.ID == nil || *orc.Spec.Import.ID != values[VarImageID] {
							t.Errorf("import: %+v", orc.Spec.Import)
						}
					default:
						if orc.Spec.Import == nil || orc.Spec.Import.Filter == nil || string(*orc.Spec.Import.Filter.Name) != values[VarImageName] {
							t.Errorf("import: %+v", orc.Spec.Import)
						}
					}
				}
				rep, err := lintInputs(context.Background(), []lintInput{{Name: "m.yaml", Data: r.Manifest}}, lintOptions{})
				if err != nil || len(rep.Findings) != 0 {
					t.Fatalf("lint: %+v %v", rep, err)
				}
			})
		}
	}
	for _, bad := range []renderOptions{
		{ImageRef: ImageRefORC, ImageSource: &ImageSource{URL: "http://x/f.qcow2"}},
		{ImageRef: ImageRefFilter, ImageSource: &ImageSource{URL: "http://x/f.qcow2", SHA512: sum}},
		{ImageRef: ImageRefORC, ImageSource: &ImageSource{URL: "ftp://x/f.qcow2", SHA512: sum}},
		{ImageRef: "glance"},
	} {
		if _, err := renderChecked(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// With a cloud, an imageRef's ORC import filter must match exactly one image.
func TestLintImageRefWithCloud(t *testing.T) {
	values := allValues(t, CAPIv1beta1)
	r, err := renderChecked(renderOptions{Values: values, ImageRef: ImageRefORC})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	lookup := func(_ context.Context, name string, tags []string) (int, error) {
		asked = append(asked, name+strings.Join(tags, ","))
		return 2, nil
	}
	rep, err := lintInputs(context.Background(), []lintInput{{Name: "m.yaml", Data: r.Manifest}}, lintOptions{Images: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 2 || rep.Findings[0].Rule != ruleImageFilter || len(asked) != 1 || asked[0] != values[VarImageName]+"flatcar-capo" {
		t.Errorf("findings %+v, asked %v", rep.Findings, asked)
	}
}
