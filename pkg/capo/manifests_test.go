package capo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

func ptr(s string) *string { return &s }

// Manifests is `manifests` in one call: the record fills what the flags leave unset (flags
// win), a bare version gets its v, the warnings come out, the image repository is set and the
// output file is written 0600 with the manifest returned.
func TestManifestsFacade(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.yaml")
	rec := &record.Record{ImageName: "flatcar-from-record", KubernetesVersion: "1.33.4", Flavor: capo.FlavorSysextBaked, Arch: "amd64"}
	img := filepath.Join(dir, "img.qcow2")
	if err := rec.Write(img); err != nil {
		t.Fatal(err)
	}
	var warnings strings.Builder
	r, err := capo.Manifests(context.Background(), capo.ManifestsOptions{
		Sets: []string{"WORKER_MACHINE_COUNT=2"}, ClusterName: ptr("demo"),
		Record: record.Path(img), Flavor: capo.FlavorBaked,
		HTTPSProxy: "http://proxy.example:3128", ImageRepository: "registry.example:5000/k8s", OutputFile: out,
		Log: &warnings})
	if err != nil {
		t.Fatal(err)
	}
	if r.Flavor != capo.FlavorSysextBaked {
		t.Errorf("flavor %s, want the record's %s (no --flavor given)", r.Flavor, capo.FlavorSysextBaked)
	}
	m := string(r.Manifest)
	for _, want := range []string{"name: flatcar-from-record", "version: v1.33.4", "imageRepository: registry.example:5000/k8s", "replicas: 2", "demo"} {
		if !strings.Contains(m, want) {
			t.Errorf("the manifest lacks %q", want)
		}
	}
	if warnings.Len() == 0 || !strings.Contains(warnings.String(), "NO_PROXY") {
		t.Errorf("warnings %q, want the NO_PROXY one for a proxy without --no-proxy", warnings.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != m {
		t.Fatalf("%s: %v; want the returned manifest", out, err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", out, fi.Mode().Perm())
	}

	// A flag wins over the record; --flavor given wins over its flavor.
	r, err = capo.Manifests(context.Background(), capo.ManifestsOptions{ImageName: ptr("flatcar-flag"),
		Record: record.Path(img), Flavor: capo.FlavorBaked, FlavorGiven: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Flavor != capo.FlavorBaked || !strings.Contains(string(r.Manifest), "name: flatcar-flag") {
		t.Errorf("flavor %s, image name from the flag missing: the flags must win over the record", r.Flavor)
	}
}

// Every bad value is the caller's (exit 2), and nothing is written.
func TestManifestsFacadeRefuses(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(filepath.Join(dir, "broken.build.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		o    capo.ManifestsOptions
		want string
	}{
		"empty name":       {capo.ManifestsOptions{ImageName: ptr("")}, "--image-name must not be empty"},
		"bad set":          {capo.ManifestsOptions{Sets: []string{"NOVALUE"}}, "--set"},
		"sysext-url":       {capo.ManifestsOptions{SysextURL: "http://x.example"}, "--sysext-url is for --flavor sysext"},
		"image repo":       {capo.ManifestsOptions{ImageRepository: "https://reg.example/"}, "--image-repository"},
		"record":           {capo.ManifestsOptions{Record: filepath.Join(dir, "broken.build.json")}, "--from-record"},
		"sysext no flavor": {capo.ManifestsOptions{Sysext: capo.SysextFlags{InsecureNoHash: true}}, "--insecure-no-hash"},
	} {
		tc.o.OutputFile = out
		_, err := capo.Manifests(context.Background(), tc.o)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want an invalid-input error naming %q", name, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: %s was written", name, out)
		}
	}
}

// LintFiles reads files and stdin ("-") under their names, and a record without its image is
// refused naming it.
func TestLintFiles(t *testing.T) {
	dir := t.TempDir()
	tmpl, err := capo.FlavorTemplate(capo.FlavorBaked, capo.CAPIv1beta2)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(file, tmpl, 0o600)
	bad := []byte("apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfigTemplate\nmetadata: {name: w}\nspec: {template: {spec: {bogusField: 1}}}\n")
	rep, err := capo.LintFiles(context.Background(), capo.LintRequest{Files: []string{file, "-"},
		Stdin: func() ([]byte, error) { return bad, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var fromStdin, fromFile int
	for _, f := range rep.Findings {
		switch f.File {
		case "<stdin>":
			fromStdin++
		case file:
			fromFile++
		default:
			t.Errorf("finding in %q, want %s or <stdin>", f.File, file)
		}
	}
	if fromStdin == 0 || rep.Documents < 2 {
		t.Errorf("%d documents, %d findings from stdin: want the stdin document linted too (%+v)", rep.Documents, fromStdin, rep.Findings)
	}
	_, err = capo.LintFiles(context.Background(), capo.LintRequest{Files: []string{file}, Record: filepath.Join(dir, "img.qcow2.build.json")})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "--from-record") {
		t.Errorf("a record without its image: err %v, want an invalid-input error naming --from-record", err)
	}
	if _, err = capo.LintFiles(context.Background(), capo.LintRequest{Files: []string{file}, CAPIVersion: "one"}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("--capi-version one: err %v, want invalid", err)
	}
}
