package capo

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

var capiAPIs = []string{CAPIv1beta1, CAPIv1beta2}

// allValues sets every variable of the template to a value of the right shape.
func allValues(t *testing.T, api string) map[string]string {
	t.Helper()
	tmpl, err := template(api)
	if err != nil {
		t.Fatal(err)
	}
	vars, err := variables(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for _, v := range vars {
		values[v] = sampleValue(v)
	}
	values[VarClusterName] = "demo"
	values[VarImageName] = "flatcar-stable-4459.2.0"
	return values
}

// Acceptance 1: the variable listing finds every ${VAR} (checked with an independent regexp),
// documents decode strictly, and a filled template keeps only the node's ${COREOS_*}.
func TestRenderedTemplate(t *testing.T) {
	for _, api := range capiAPIs {
		t.Run(api, func(t *testing.T) {
			tmpl, _ := template(api)
			var want []string
			seen := map[string]bool{}
			for _, m := range regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(tmpl), -1) {
				if !seen[m[2]] {
					seen[m[2]] = true
					want = append(want, m[2])
				}
			}
			sort.Strings(want)
			r, err := renderChecked(renderOptions{CAPIAPI: api})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(r.Variables, " ") != strings.Join(want, " ") {
				t.Fatalf("Variables = %v\nwant %v", r.Variables, want)
			}
			for _, v := range []string{VarClusterName, VarKubernetesVersion, VarImageName, "OPENSTACK_CLOUD",
				"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR", "OPENSTACK_NODE_MACHINE_FLAVOR", "OPENSTACK_SSH_KEY_NAME",
				"OPENSTACK_EXTERNAL_NETWORK_ID", "OPENSTACK_FAILURE_DOMAIN", "OPENSTACK_DNS_NAMESERVERS",
				"CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"} {
				if !contains(r.Variables, v) {
					t.Errorf("template lacks CAPO variable %s", v)
				}
			}
			if len(r.Documents) != 8 || len(r.UserData) != 2 {
				t.Fatalf("documents %v, user-data estimates %v", r.Documents, r.UserData)
			}

			full, err := renderChecked(renderOptions{CAPIAPI: api, Values: allValues(t, api)})
			if err != nil {
				t.Fatal(err)
			}
			if len(full.Missing) != 0 {
				t.Fatalf("missing %v with every value set", full.Missing)
			}
			rest := regexp.MustCompile(`\$\{[^}]*\}`).FindAllString(string(full.Manifest), -1)
			for _, ref := range rest {
				if !strings.HasPrefix(ref, "${COREOS_OPENSTACK_") {
					t.Errorf("%s remains in the filled manifest", ref)
				}
			}
			if len(rest) == 0 || strings.Contains(string(full.Manifest), "$$") {
				t.Fatalf("node-side references not unescaped: %d found", len(rest))
			}
			docs, err := ParseDocuments("filled", full.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				if _, err := decodeStrict(d); err != nil {
					t.Error(err)
				}
				if u := unknownFields(d); len(u) > 0 {
					t.Errorf("%s: unknown fields %v", d, u)
				}
			}
		})
	}
}

// The four copies of additionalConfig (two templates, control plane and workers) stay equal.
func TestTemplatesShareAdditionalConfig(t *testing.T) {
	var configs []string
	for _, api := range capiAPIs {
		r, err := renderChecked(renderOptions{CAPIAPI: api, Values: allValues(t, api)})
		if err != nil {
			t.Fatal(err)
		}
		docs, _ := ParseDocuments(api, r.Manifest)
		for _, d := range docs {
			if b, ok := newBootstrapSpec(d); ok {
				src, _ := b.additionalConfig()
				configs = append(configs, src)
			}
		}
	}
	if len(configs) != 4 {
		t.Fatalf("found %d additionalConfig, want 4", len(configs))
	}
	for _, c := range configs[1:] {
		if c != configs[0] {
			t.Fatalf("additionalConfig differs between templates:\n%s\n---\n%s", configs[0], c)
		}
	}
}

func TestRenderRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		opts renderOptions
		want string
	}{
		{"unknown variable", renderOptions{Values: map[string]string{"NO_SUCH_VAR": "x"}}, "has no variable NO_SUCH_VAR"},
		{"mistyped count", renderOptions{Values: map[string]string{"WORKER_MACHINE_COUNT": "two"}}, "a whole number"},
		// Inside a longer value (the Ignition config's URL) a value cannot be quoted.
		{"value breaking YAML", renderOptions{Flavor: FlavorSysext, Values: map[string]string{VarSysextURL: "http://x/a: b"}}, "cannot go into"},
		{"unknown API", renderOptions{CAPIAPI: "v1alpha4"}, "unknown CAPI API version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChecked(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestImageSnippet(t *testing.T) {
	s, err := imageSnippet("flatcar-stable-4459.2.0", "")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ParseDocuments("snippet", s)
	if err != nil || len(docs) != 2 {
		t.Fatalf("snippet has %d documents (%v):\n%s", len(docs), err, s)
	}
	for _, d := range docs {
		img, _ := imageOf(machineSpec(d))
		if d.Kind != "OpenStackMachineTemplate" || img.Name != "flatcar-stable-4459.2.0" {
			t.Fatalf("snippet document %s selects %v", d, img)
		}
	}
}
