package capo

import (
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
)

// bootstrapIgnition transpiles the additionalConfig of a bootstrap config document without an
// issue and merges it into CABPK's base config; ok is false for the other documents.
func bootstrapIgnition(t *testing.T, d *Document) (res CLCResult, merged igntypes.Config, ok bool) {
	t.Helper()
	b, ok := newBootstrapSpec(d)
	if !ok {
		return res, merged, false
	}
	src, _ := b.additionalConfig()
	res = TranspileCLC(src)
	if res.Fatal || len(res.Issues) > 0 {
		t.Fatalf("%s: %v", d, res.Issues)
	}
	_, merged, err := estimateUserData(b, &res.Ignition)
	if err != nil {
		t.Fatal(err)
	}
	return res, merged, true
}

// Acceptance 3: the template's additionalConfig becomes valid Ignition 2.3 that enables the
// units and carries the kubeadm.service drop-in, alone and merged into CABPK's base config.
func TestTemplateIgnition(t *testing.T) {
	r, err := renderChecked(renderOptions{Values: allValues(t, CAPIv1beta1)})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := ParseDocuments("filled", r.Manifest)
	checked := 0
	for _, d := range docs {
		res, merged, ok := bootstrapIgnition(t, d)
		if !ok {
			continue
		}
		if res.Ignition.Ignition.Version != "2.3.0" {
			t.Fatalf("Ignition version %q, want 2.3.0 as CABPK emits", res.Ignition.Ignition.Version)
		}
		for name, cfg := range map[string]igntypes.Config{"additionalConfig": res.Ignition, "merged user-data": merged} {
			if err := validateIgnition(cfg); err != nil {
				t.Fatalf("%s %s: %v", d, name, err)
			}
			// Ignition 2.3's Append concatenates unit lists: gather every entry of a unit.
			units := map[string]igntypes.Unit{}
			for _, u := range cfg.Systemd.Units {
				m := units[u.Name]
				m.Name, m.Contents, m.Dropins = u.Name, m.Contents+u.Contents, append(m.Dropins, u.Dropins...)
				if u.Enabled != nil {
					m.Enabled = u.Enabled
				}
				units[u.Name] = m
			}
			for _, n := range []string{"coreos-metadata-sshkeys@.service", "kubeadm.service"} {
				if u, ok := units[n]; !ok || u.Enabled == nil || !*u.Enabled {
					t.Errorf("%s %s: unit %s not enabled: %+v", d, name, n, u)
				}
			}
			kubeadm := units["kubeadm.service"]
			if len(kubeadm.Dropins) != 1 || kubeadm.Dropins[0].Name != "10-flatcar.conf" {
				t.Fatalf("%s %s: kubeadm.service drop-ins %+v", d, name, kubeadm.Dropins)
			}
			for _, line := range []string{"Requires=containerd.service coreos-metadata.service",
				"After=containerd.service coreos-metadata.service", "EnvironmentFile=/run/metadata/flatcar",
				// A failed kubeadm runs again (the node proof's join gave up on one slow answer).
				"Restart=on-failure", "RestartSec=30", "StartLimitBurst=10"} {
				if !strings.Contains(kubeadm.Dropins[0].Contents, line+"\n") {
					t.Errorf("%s %s: drop-in lacks %q", d, name, line)
				}
			}
			// CABPK's own unit (CAPI v1.14 runs the script as /bin/bash /etc/kubeadm.sh).
			if name == "merged user-data" && !strings.Contains(kubeadm.Contents, "ExecStart=/bin/bash /etc/kubeadm.sh\n") {
				t.Errorf("%s: merged config lost CABPK's kubeadm.service", d)
			}
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("checked %d bootstrap configs, want 2", checked)
	}
}

func TestTranspileCLCReportsLines(t *testing.T) {
	tests := []struct {
		src, want string
		line      int
		fatal     bool
	}{
		{"systemd:\n  units:\n  - name: a.service\n    enabeld: true\n", "unrecognized key: enabeld", 4, false},
		{"systemd:\n  units: [\n", "did not find expected node content", 2, true},
		{"storage:\n  files:\n  - path: relative\n    mode: 0644\n", "path not absolute", 3, true},
	}
	for _, tt := range tests {
		res := TranspileCLC(tt.src)
		found := false
		for _, is := range res.Issues {
			if strings.Contains(is.Message, tt.want) && is.Line == tt.line {
				found = true
			}
		}
		if !found || res.Fatal != tt.fatal {
			t.Errorf("TranspileCLC(%q) = %v (fatal %v), want %q at line %d (fatal %v)", tt.src, res.Issues, res.Fatal, tt.want, tt.line, tt.fatal)
		}
	}
}
