package capo

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	cabpkignition "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// lint reports what CAPI's own webhooks refuse, with their field path and message: the v1beta2
// template of 8eeba9d (KCP's init timeout without the join one: issue 43, refused by KCP's
// webhook on a real management cluster) and a KubeadmConfigTemplate writing one path twice.
func TestLintRunsCAPIValidation(t *testing.T) {
	rep := lintFile(t, "../../testdata/lint/capi-validation.yaml")
	want := map[string]string{
		"KubeadmControlPlane spec.kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds": "must be set to the same value both in initConfiguration.timeouts (1200) and in joinConfiguration.timeouts (unset)",
		"KubeadmControlPlane spec.kubeadmConfigSpec.joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds": "Invalid value: \"unset\"",
		"KubeadmConfigTemplate spec.template.spec.files[1].path":                                                        "path property must be unique among all files",
	}
	got := map[string]Finding{}
	for _, f := range rep.Findings {
		if f.Rule == ruleCAPIValidation {
			got[f.Kind+" "+f.Path] = f
		}
	}
	for where, msg := range want {
		f, ok := got[where]
		if !ok || !strings.Contains(f.Message, msg) || f.Severity != severityError || f.Line == 0 {
			t.Errorf("%s: %+v, want an error saying %q", where, f, msg)
		}
	}
	if len(got) != len(want) || rep.Errors != len(want) {
		t.Errorf("%d capi-validation findings, %d errors: %+v", len(got), rep.Errors, rep.Findings)
	}
	// The finding points at the line of the field that exists (the init timeout, line 121).
	if f := got["KubeadmControlPlane spec.kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds"]; f.Line != 121 {
		t.Errorf("init timeout reported at line %d, want 121", f.Line)
	}
}

// CAPI v1.14's fields are known: files[].contentFormat is no unknown field, and what the type
// does not have still is.
func TestLintKnowsCAPI114Fields(t *testing.T) {
	doc := `apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: w
spec:
  template:
    spec:
      files:
      - path: /etc/motd
        content: "{{ .KubernetesVersion }}"
        contentFormat: Template
        contentFormatt: Raw
`
	docs, err := ParseDocuments("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := unknownFields(docs[0])
	if len(u) != 1 || u[0].String() != "spec.template.spec.files[0].contentFormatt" {
		t.Fatalf("unknown fields %v, want only contentFormatt", u)
	}
	if _, err := decodeStrict(docs[0]); err == nil || !strings.Contains(err.Error(), `unknown field "contentFormatt"`) {
		t.Fatalf("DecodeStrict: %v", err)
	}
	// For CAPI 1.13 the field itself is unknown.
	for v, want := range map[string]int{"1.14.0": 1, "1.13.4": 2, "1.12": 2} {
		rep, err := lintInputs(context.Background(), []lintInput{{Name: "t.yaml", Data: []byte(doc)}}, lintOptions{CAPIVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range rep.Findings {
			if f.Rule == ruleUnknownField && strings.HasPrefix(f.Path, "spec.template.spec.files[0].contentFormat") {
				n++
			}
		}
		if n != want {
			t.Errorf("--capi-version %s: %d unknown-field findings, want %d: %+v", v, n, want, rep.Findings)
		}
	}
}

// --capi-version takes the releases whose types this build links or older ones (their pitfalls);
// a newer one is refused with the fix.
func TestLintCAPIVersionRange(t *testing.T) {
	for _, v := range []string{"1.12", "1.13.4", "1.14", "v1.14.2", "1.3.5"} {
		if err := (lintOptions{CAPIVersion: v}).Validate(); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"1.15", "1.16.0", "2.0"} {
		err := (lintOptions{CAPIVersion: v}).Validate()
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "--capi-version 1.14") {
			t.Errorf("%s: %v, want invalid naming --capi-version 1.14", v, err)
		}
	}
	if NewestCAPIVersion != "1.14.2" {
		t.Errorf("NewestCAPIVersion %s", NewestCAPIVersion)
	}
}

// The user-data estimate is CAPI's renderer's output: rendering with additionalConfig given to
// CAPI's renderer yields exactly the bytes the estimate counts, for a control plane and a worker.
func TestUserDataEstimateIsCABPKs(t *testing.T) {
	r, err := renderChecked(renderOptions{CAPIAPI: CAPIv1beta2, Values: allValues(t, CAPIv1beta2)})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ParseDocuments("m.yaml", r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[bool]bool{}
	for _, d := range docs {
		b, ok := newBootstrapSpec(d)
		if !ok {
			continue
		}
		ac, _ := b.additionalConfig()
		res := TranspileCLC(ac)
		size, _, err := estimateUserData(b, &res.Ignition)
		if err != nil {
			t.Fatal(err)
		}
		real, err := renderUserData(b, &kubeadmv1beta2.IgnitionSpec{ContainerLinuxConfig: kubeadmv1beta2.ContainerLinuxConfig{AdditionalConfig: ac}})
		if err != nil {
			t.Fatal(err)
		}
		if want := base64.StdEncoding.EncodedLen(len(real)); size != want {
			t.Errorf("%s: estimate %d, CAPI's renderer gives %d", d, size, want)
		}
		for _, s := range []string{"kubeadm.service", "/etc/kubeadm.yml", "/etc/kubeadm.sh"} {
			if !strings.Contains(string(real), s) {
				t.Errorf("%s: CAPI's rendering has no %s", d, s)
			}
		}
		if b.controlPlane != strings.Contains(string(real), "/etc/kubernetes/pki/ca.key") {
			t.Errorf("%s: control plane %v, certificates in the user-data %v", d, b.controlPlane, !b.controlPlane)
		}
		seen[b.controlPlane] = true
	}
	if !seen[true] || !seen[false] {
		t.Fatalf("the template has no control plane or no worker: %v", seen)
	}
}

func TestParseFieldPath(t *testing.T) {
	for in, want := range map[string]string{
		"spec.files[1].path":                  "spec.files[1].path",
		"metadata.labels[cluster.x-k8s.io/a]": "metadata.labels.cluster.x-k8s.io/a",
		"spec":                                "spec",
	} {
		if got := parseFieldPath(in).String(); got != want {
			t.Errorf("parseFieldPath(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := validateCAPI(context.Background(), &Document{APIVersion: "v1", Kind: "Secret"}); err != nil {
		t.Fatal(err)
	}
}

// The truth behind cabpk-render: CABPK's own renderer refuses a file without permissions (it
// gives no default), and renders it once they are set. The day CAPI defaults the mode, this
// fails and the rule must go.
func TestCABPKRendererRefusesFileWithoutPermissions(t *testing.T) {
	render := func(perm string) error {
		base := cloudinit.BaseUserData{AdditionalFiles: []kubeadmv1beta2.File{{Path: "/etc/motd", Content: "hello\n", Permissions: perm}}}
		_, _, err := cabpkignition.NewNode(&cabpkignition.NodeInput{NodeInput: &cloudinit.NodeInput{BaseUserData: base, JoinConfiguration: "kind: JoinConfiguration\n"}})
		return err
	}
	if err := render(""); err == nil || !strings.Contains(err.Error(), "mode unspecified for file") {
		t.Fatalf("a file without permissions: %v, want CABPK's refusal", err)
	}
	if err := render("0644"); err != nil {
		t.Fatal(err)
	}
}
