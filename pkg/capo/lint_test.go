package capo

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .expected files of testdata/lint and testdata/seed")

// lintFile lints one testdata file with the options of its "# lint:" header line.
func lintFile(t *testing.T, path string) *LintReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var opts lintOptions
	if first, _, _ := strings.Cut(string(data), "\n"); strings.HasPrefix(first, "# lint: --capi-version ") {
		opts.CAPIVersion = strings.TrimPrefix(first, "# lint: --capi-version ")
	} else if strings.HasPrefix(first, "# lint: --min-disk ") {
		opts.MinDiskGiB, _ = strconv.Atoi(strings.TrimPrefix(first, "# lint: --min-disk "))
	}
	rep, err := lintInputs(context.Background(), []lintInput{{Name: filepath.Base(path), Data: data}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func findingLines(rep *LintReport) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		fmt.Fprintf(&b, "%s %s document=%d line=%d %s\n", f.Severity, f.Rule, f.Document, f.Line, f.Path)
	}
	return b.String()
}

// Acceptance 2: the seed, one broken variant per rule and the correct files produce exactly
// the findings in their .expected file (empty for the correct ones).
func TestLintTestdata(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/lint/*.yaml")
	seed, _ := filepath.Glob("../../testdata/seed/*.yaml")
	files = append(files, seed...)
	if len(files) < 18 {
		t.Fatalf("only %d testdata files", len(files))
	}
	covered := map[string]bool{}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			got := findingLines(lintFile(t, path))
			expected := strings.TrimSuffix(path, ".yaml") + ".expected"
			if *update {
				if err := os.WriteFile(expected, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(expected)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("findings differ from %s\ngot:\n%swant:\n%s", expected, got, want)
			}
			for _, line := range strings.Split(got, "\n") {
				if f := strings.Fields(line); len(f) > 1 {
					covered[f[1]] = true
				}
			}
		})
	}
	for _, r := range rules {
		if !covered[r.ID] && r.ID != ruleImageFilter { // image-filter needs a cloud: TestLintImageFilter
			t.Errorf("no testdata file exercises rule %s", r.ID)
		}
	}
}

func TestLintImageFilter(t *testing.T) {
	data, err := os.ReadFile("../../testdata/lint/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2} {
		var asked []string
		lookup := func(_ context.Context, name string, tags []string) (int, error) {
			asked = append(asked, name)
			return n, nil
		}
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "good.yaml", Data: data}}, lintOptions{Images: lookup})
		if err != nil {
			t.Fatal(err)
		}
		// Two machine templates share one filter: the cloud is asked once.
		if len(asked) != 1 || asked[0] != "flatcar-stable-4459.2.0-kube-v1.33.4" {
			t.Fatalf("lookups %v", asked)
		}
		want := 2
		if n == 1 {
			want = 0
		}
		if rep.Errors != want {
			t.Fatalf("%d matching images: %d errors, want %d:\n%s", n, rep.Errors, want, findingLines(rep))
		}
		for _, f := range rep.Findings {
			if f.Rule != ruleImageFilter || f.Path != "spec.template.spec.image.filter" {
				t.Fatalf("unexpected finding %+v", f)
			}
		}
	}
}

// The documents these tests write inline; apitypes_mirror_test.go checks them against the API
// mirror too.
const (
	lintLastAppliedKCP = `apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata:
  name: cp
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"spec":{"kubeadmConfigSpec":{"joinConfiguration":{}}}}'
spec:
  kubeadmConfigSpec:
    format: ignition
`
	lintV1alpha7Template = `apiVersion: infrastructure.cluster.x-k8s.io/v1alpha7
kind: OpenStackMachineTemplate
metadata: {name: w}
spec:
  template:
    spec:
      image: {name: Flatcar-stable}
`
	lintMachineDeploymentV1beta2 = `apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: md}
spec:
  template:
    spec:
      bootstrap: {configRef: {kind: KubeadmConfigTemplate, name: w}}
      infrastructureRef: {kind: OpenStackMachineTemplate, name: w}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: w}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs:
          - {name: provider-id, value: "openstack:///x"}
`
	lintFuzzSeedKCP = "kind: KubeadmControlPlane\napiVersion: controlplane.cluster.x-k8s.io/v1beta1\nspec: {kubeadmConfigSpec: {format: ignition, files: [1]}}\n"
)

func TestLintFormatChangeFromLastApplied(t *testing.T) {
	doc := lintLastAppliedKCP
	for version, want := range map[string]int{"1.2.11": 1, "1.2.12": 0, "1.3.5": 1, "1.3.6": 0, "1.4.0": 0, "1.1.0": 1} {
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "kcp.yaml", Data: []byte(doc)}}, lintOptions{CAPIVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range rep.Findings {
			if f.Rule == ruleFormatImmutable {
				n++
			}
		}
		if n != want {
			t.Errorf("CAPI %s: %d format-immutable findings, want %d", version, n, want)
		}
	}
}

// CAPO v1alpha7's image filter and v1beta2's kubeletExtraArgs list are read too.
func TestLintOlderAndNewerShapes(t *testing.T) {
	doc := lintV1alpha7Template + "---\n" + lintMachineDeploymentV1beta2
	rep, err := lintInputs(context.Background(), []lintInput{{Name: "mixed.yaml", Data: []byte(doc)}}, lintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := findingLines(rep)
	if want := "error flatcar-format document=2 line=23 spec.template.spec.format\n"; got != want {
		t.Fatalf("findings:\n%swant:\n%s", got, want)
	}
	rep, _ = lintInputs(context.Background(), []lintInput{{Name: "mixed.yaml", Data: []byte(strings.Replace(doc, "    spec:\n      joinConfiguration", "    spec:\n      format: ignition\n      joinConfiguration", 1))}}, lintOptions{})
	if !strings.Contains(findingLines(rep), "provider-id-metadata document=2 line=28 spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value") {
		t.Fatalf("v1beta2 provider-id not found:\n%s", findingLines(rep))
	}
}

func TestParseCAPIVersion(t *testing.T) {
	for in, want := range map[string]string{"1.4": "1.4.0", "v1.13.0": "1.13.0", " 1.2.12 ": "1.2.12"} {
		v, err := parseCAPIVersion(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseCAPIVersion(%q) = %v, %v; want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"", "1", "1.x", "1.2.3.4", "latest", "1.-2"} {
		if _, err := parseCAPIVersion(in); err == nil {
			t.Errorf("ParseCAPIVersion(%q) accepted", in)
		}
	}
	if _, err := lintInputs(context.Background(), nil, lintOptions{CAPIVersion: "one"}); err == nil {
		t.Error("Lint accepted --capi-version one")
	}
}

// FuzzLint: arbitrary input never panics and every finding names a catalogued rule.
func FuzzLint(f *testing.F) {
	seed, _ := os.ReadFile("../../testdata/seed/capo-flatcar-issue.yaml")
	f.Add(seed)
	f.Add([]byte(lintFuzzSeedKCP))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "f", Data: data}}, lintOptions{CAPIVersion: "1.1.0"})
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range rep.Findings {
			ruleByID(fd.Rule)
		}
	})
}

func TestVersionRank(t *testing.T) {
	order := []string{"v1alpha1", "v1alpha7", "v1beta1", "v1beta2", "v1", "v2alpha1", "v2"}
	for i := 1; i < len(order); i++ {
		if versionRank(order[i-1]) >= versionRank(order[i]) {
			t.Errorf("versionRank(%s) >= versionRank(%s)", order[i-1], order[i])
		}
	}
}

// CABPK refuses every transpiler warning under strict: true, so lint reports it as an error there.
func TestLintCLCStrict(t *testing.T) {
	data, err := os.ReadFile("../../testdata/lint/clusterctl-variables.yaml")
	if err != nil {
		t.Fatal(err)
	}
	strict := strings.Replace(string(data), "        containerLinuxConfig:\n", "        containerLinuxConfig:\n          strict: true\n", 1)
	rep, err := lintInputs(context.Background(), []lintInput{{Name: "strict.yaml", Data: []byte(strict)}}, lintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := findingLines(rep)
	if !strings.Contains(got, "error clc-invalid document=0 line=25 ") || strings.Contains(got, "clc-warning") {
		t.Fatalf("strict: true: findings\n%s", got)
	}
	if !strings.Contains(rep.Findings[0].Message, "strict: true: CABPK refuses the config") {
		t.Fatalf("message %q", rep.Findings[0].Message)
	}
}

// A manifest for kubectl (rendered: only the node's ${COREOS_*} left) is read as it is: its
// references are for the node's shell, where clusterctl's syntax rules do not apply.
func TestLintRenderedManifestKeepsShellSyntax(t *testing.T) {
	doc := `apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata:
  name: n
spec:
  preKubeadmCommands:
  - echo ${COREOS_OPENSTACK_HOSTNAME-none}
`
	for _, tc := range []struct {
		doc  string
		want bool
	}{{doc, false}, {doc + "  postKubeadmCommands:\n  - echo $${X} ${CLUSTER_NAME}\n", true}} {
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "m.yaml", Data: []byte(tc.doc)}}, lintOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(findingLines(rep), ruleVariableSyntax); got != tc.want {
			t.Errorf("clusterctl-variable reported %v, want %v:\n%s", got, tc.want, findingLines(rep))
		}
	}
}

// A ClusterClass's patch that sets its machine templates' image makes the template's own image
// a placeholder: image-filter does not ask for an ORC Image (or a Glance image) by that name.
func TestLintImagePatchedByClusterClass(t *testing.T) {
	tmpl := `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackMachineTemplate
metadata:
  name: cp
spec:
  template:
    spec:
      flavor: m1
      image:
        imageRef:
          name: placeholder
`
	class := `apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata:
  name: c
spec:
  controlPlane:
    machineInfrastructure:
      templateRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: OpenStackMachineTemplate
        name: cp
  patches:
  - name: image
    definitions:
    - selector:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: OpenStackMachineTemplate
        matchResources:
          controlPlane: true
      jsonPatches:
      - op: replace
        path: /spec/template/spec/image/imageRef/name
        valueFrom:
          variable: imageRef
`
	for _, tc := range []struct {
		doc  string
		want bool
	}{{tmpl, true}, {tmpl + "---\n" + class, false}} {
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "c.yaml", Data: []byte(tc.doc)}}, lintOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(findingLines(rep), ruleImageFilter); got != tc.want {
			t.Errorf("image-filter reported %v, want %v:\n%s", got, tc.want, findingLines(rep))
		}
	}
}
