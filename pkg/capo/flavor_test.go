package capo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
)

// The base template's additionalConfig is templates/clc/baked.yaml, so every flavor is the base
// with its own clc file and nothing else changed.
func TestFlavorTemplatesComeFromOneBase(t *testing.T) {
	baked, err := os.ReadFile("../../templates/clc/baked.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range capiAPIs {
		base, err := template(api)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := withAdditionalConfig(base, string(baked), nil); err != nil || string(again) != string(base) {
			t.Fatalf("%s: templates/clc/baked.yaml differs from the base template's additionalConfig (%v)", api, err)
		}
		for flavor := range flavorHeaders {
			got, err := FlavorTemplate(flavor, api)
			if err != nil {
				t.Fatal(err)
			}
			clc, _ := os.ReadFile("../../templates/clc/" + flavor + ".yaml")
			first := strings.SplitN(string(clc), "\n", 2)[0]
			if strings.Count(string(got), first+"\n") != 2 {
				t.Fatalf("%s %s: the flavor's additionalConfig is not in both bootstrap configs", flavor, api)
			}
			// Put the baked additionalConfig back and drop the flavor's header lines: the base again.
			back, err := withAdditionalConfig(got, string(baked), nil)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(back), "\n")
			lines = append(lines[:1], lines[1+len(flavorHeaders[flavor]):]...)
			if strings.Join(lines, "") != string(base) {
				t.Errorf("%s %s differs from the base template in more than its additionalConfig", flavor, api)
			}
		}
	}
	entries, _ := os.ReadDir("../../templates")
	var yamls []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".yaml" && !strings.HasPrefix(e.Name(), "clusterclass-") { // --clusterclass's own
			yamls = append(yamls, e.Name())
		}
	}
	if len(yamls) != len(capiAPIs) {
		t.Errorf("templates/ holds %v: want one base template per CAPI API version", yamls)
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
				if flavor == FlavorSysext {
					values[VarSysextSHA512] = strings.Repeat("5e", 64)
				}
				r, err := renderChecked(renderOptions{Flavor: flavor, CAPIAPI: api, Values: values})
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Missing) != 0 || len(r.Documents) != 8 || len(r.UserData) != 2 {
					t.Fatalf("missing %v, documents %v, user-data %v", r.Missing, r.Documents, r.UserData)
				}
				rep, err := lintInputs(context.Background(), []lintInput{{Name: flavor + ".yaml", Data: r.Manifest}}, lintOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Findings) != 0 {
					t.Fatalf("lint findings: %+v", rep.Findings)
				}
				docs, _ := ParseDocuments("filled", r.Manifest)
				checked := 0
				for _, d := range docs {
					if u := unknownFields(d); len(u) > 0 {
						t.Errorf("%s: unknown fields %v", d, u)
					}
					_, merged, ok := bootstrapIgnition(t, d)
					if !ok {
						continue
					}
					if err := validateIgnition(merged); err != nil {
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
	if _, err := renderChecked(renderOptions{Flavor: "packer"}); err == nil || !strings.Contains(err.Error(), "baked, sysext-baked, sysext") {
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
	if h := file.Contents.Verification.Hash; h == nil || *h != "sha512-"+strings.Repeat("5e", 64) {
		t.Errorf("sysext download without Ignition's verification.hash: %v", h)
	}
	if link == nil || link.Target != raw || link.Hard {
		t.Fatalf("sysext link: %+v", link)
	}
}

func TestSysextURL(t *testing.T) {
	values := allValues(t, CAPIv1beta1)
	values[VarSysextURL] = "http://10.0.0.5:8080/sysexts"
	r, err := renderChecked(renderOptions{Flavor: FlavorSysext, Values: values})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(r.Manifest), "url: http://10.0.0.5:8080/sysexts/kubernetes-v1.33.0-x86-64.raw"); n != 2 {
		t.Errorf("the mirror URL appears %d times, want 2:\n%s", n, r.Manifest)
	}
	if _, err := renderChecked(renderOptions{Flavor: FlavorBaked, Values: map[string]string{VarSysextURL: "http://x"}}); err == nil {
		t.Error("the baked flavor accepted " + VarSysextURL)
	}
}
