package capo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
)

var flavorHeaders = map[string][]string{
	FlavorSysextBaked: {
		"Flavor sysext-baked: for an image made by 'flatcar-capo build --method sysext', which carries the",
		"Kubernetes sysext (/etc/extensions/kubernetes.raw): nothing is downloaded at boot. update-engine and",
		"locksmithd are masked so that nodes do not update and reboot on their own.",
	},
	FlavorSysext: {
		"Flavor sysext (CAPO's flatcar-sysext): for Flatcar's stock OpenStack image. Ignition downloads",
		"kubernetes-${KUBERNETES_VERSION}-x86-64.raw from KUBERNETES_SYSEXT_URL at first boot (make one with",
		"'flatcar-capo sysext create' for a mirror) and links it as /etc/extensions/kubernetes.raw.",
	},
}

// The flavor templates are the baked ones with another additionalConfig (templates/clc/*.yaml)
// and nothing else changed; `go test ./pkg/capo -run FlavorTemplates -update` rewrites them.
func TestFlavorTemplatesAreGenerated(t *testing.T) {
	baked, err := os.ReadFile("../../templates/clc/baked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range capiAPIs {
		base, err := Template(api)
		if err != nil {
			t.Fatal(err)
		}
		// The baked template itself is what the generator makes from clc/baked.yaml.
		if again, err := withAdditionalConfig(base, string(baked), nil); err != nil || string(again) != string(base) {
			t.Fatalf("%s: templates/clc/baked.yaml differs from the baked template's additionalConfig (%v)", api, err)
		}
		for flavor, header := range flavorHeaders {
			clc, err := os.ReadFile("../../templates/clc/" + flavor + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			want, err := withAdditionalConfig(base, string(clc), header)
			if err != nil {
				t.Fatal(err)
			}
			name, _ := templateFile(flavor, api)
			path := filepath.Join("../../templates", name)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := FlavorTemplate(flavor, api)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("%s is out of date: run go test ./pkg/capo -run FlavorTemplates -update", name)
			}
		}
	}
}

// Every flavor renders and validates like the baked one (strict API types, CLC -> Ignition 2.3,
// user-data size), lints clean, and carries what makes it that flavor.
func TestFlavors(t *testing.T) {
	for _, flavor := range FlavorNames() {
		for _, api := range capiAPIs {
			t.Run(flavor+"/"+api, func(t *testing.T) {
				values := allValues(t, api)
				delete(values, VarSysextURL)
				r, err := Render(RenderOptions{Flavor: flavor, CAPIAPI: api, Values: values})
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Missing) != 0 || len(r.Documents) != 8 || len(r.UserData) != 2 {
					t.Fatalf("missing %v, documents %v, user-data %v", r.Missing, r.Documents, r.UserData)
				}
				rep, err := Lint(context.Background(), []Input{{Name: flavor + ".yaml", Data: r.Manifest}}, LintOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Findings) != 0 {
					t.Fatalf("lint findings: %+v", rep.Findings)
				}
				docs, _ := ParseDocuments("filled", r.Manifest)
				checked := 0
				for _, d := range docs {
					if u := UnknownFields(d); len(u) > 0 {
						t.Errorf("%s: unknown fields %v", d, u)
					}
					b, ok := newBootstrapSpec(d)
					if !ok {
						continue
					}
					src, _ := b.additionalConfig()
					res := TranspileCLC(src)
					if res.Fatal || len(res.Issues) > 0 {
						t.Fatalf("%s: %v", d, res.Issues)
					}
					_, merged, err := estimateUserData(b, &res.Ignition)
					if err != nil {
						t.Fatal(err)
					}
					if err := ValidateIgnition(merged); err != nil {
						t.Fatal(err)
					}
					checkFlavorIgnition(t, flavor, merged, values[VarKubernetesVersion])
					checked++
				}
				if checked != 2 {
					t.Fatalf("checked %d bootstrap configs", checked)
				}
			})
		}
	}
	if _, err := Render(RenderOptions{Flavor: "packer"}); err == nil || !strings.Contains(err.Error(), "baked, sysext-baked, sysext") {
		t.Errorf("unknown flavor: %v", err)
	}
}

func checkFlavorIgnition(t *testing.T, flavor string, cfg igntypes.Config, k8s string) {
	t.Helper()
	masked := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		if u.Mask {
			masked[u.Name] = true
		}
	}
	wantMasks := flavor != FlavorBaked
	for _, u := range []string{"update-engine.service", "locksmithd.service"} {
		if masked[u] != wantMasks {
			t.Errorf("%s masked: %v, want %v", u, masked[u], wantMasks)
		}
	}
	raw := "/opt/extensions/kubernetes/kubernetes-" + k8s + "-x86-64.raw"
	var file *igntypes.File
	for i, f := range cfg.Storage.Files {
		if f.Path == raw {
			file = &cfg.Storage.Files[i]
		}
	}
	var link *igntypes.Link
	for i, l := range cfg.Storage.Links {
		if l.Path == "/etc/extensions/kubernetes.raw" {
			link = &cfg.Storage.Links[i]
		}
	}
	if flavor != FlavorSysext {
		if file != nil || link != nil {
			t.Errorf("%s downloads or links a sysext: %v %v", flavor, file, link)
		}
		return
	}
	if file == nil || file.Contents.Source != DefaultSysextURL+"/kubernetes-"+k8s+"-x86-64.raw" || file.Filesystem != "root" {
		t.Fatalf("sysext download: %+v", file)
	}
	if link == nil || link.Target != raw || link.Hard {
		t.Fatalf("sysext link: %+v", link)
	}
}

func TestSysextURL(t *testing.T) {
	values := allValues(t, CAPIv1beta1)
	values[VarSysextURL] = "http://10.0.0.5:8080/sysexts"
	r, err := Render(RenderOptions{Flavor: FlavorSysext, Values: values})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(r.Manifest), "url: http://10.0.0.5:8080/sysexts/kubernetes-v1.33.0-x86-64.raw"); n != 2 {
		t.Errorf("the mirror URL appears %d times, want 2:\n%s", n, r.Manifest)
	}
	if _, err := Render(RenderOptions{Flavor: FlavorBaked, Values: map[string]string{VarSysextURL: "http://x"}}); err == nil {
		t.Error("the baked flavor accepted " + VarSysextURL)
	}
}
