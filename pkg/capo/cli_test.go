package capo_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

func TestManifestsCommand(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-name", "flatcar-stable-4459.2.0").MustSucceed(t)
	if !strings.Contains(r.Stdout, "name: flatcar-stable-4459.2.0") || !strings.Contains(r.Stdout, "$${COREOS_OPENSTACK_HOSTNAME}") ||
		!strings.Contains(r.Stdout, "${CLUSTER_NAME}") {
		t.Fatalf("template not rendered as a clusterctl template:\n%s", r.Stdout)
	}
	for _, want := range []string{"Validated 8 documents", "User-data estimate: KubeadmControlPlane", "Still to set", "CLUSTER_NAME"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}

	out := filepath.Join(t.TempDir(), "cluster.yaml")
	r = testutil.Run(t, "manifests", "--capi-api", "v1beta2", "--cluster-name", "demo", "--kubernetes-version", "1.33.4",
		"--output-file", out, "-o", "json").MustSucceed(t)
	var rep struct {
		OutputFile string   `json:"outputFile"`
		Missing    []string `json:"missing"`
		Manifest   string   `json:"manifest"`
		UserData   []struct{ Bytes, Limit int }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.Stdout)
	}
	if rep.OutputFile != out || rep.Manifest != "" || len(rep.UserData) != 2 || rep.UserData[0].Bytes == 0 || rep.UserData[0].Limit != 65535 {
		t.Fatalf("report %+v", rep)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600 (it may hold clouds.yaml)", out, fi.Mode().Perm())
	}
	if !strings.Contains(string(data), "cluster.x-k8s.io/v1beta2") || !strings.Contains(string(data), "version: v1.33.4") ||
		!strings.Contains(string(data), "name: demo-md-0") {
		t.Fatalf("output file not filled for v1beta2:\n%s", data)
	}

	testutil.Run(t, "manifests", "--set", "WORKER_MACHINE_COUNT").MustFail(t, 2, "is not VAR=value")
	testutil.Run(t, "manifests", "--set", "NOPE=1").MustFail(t, 2, "has no variable NOPE")
	testutil.Run(t, "manifests", "--set", "WORKER_MACHINE_COUNT=many").MustFail(t, 2, "MachineDeployment")
	testutil.Run(t, "manifests", "--capi-api", "v1alpha4").MustFail(t, 2, "v1beta2")
	testutil.Run(t, "manifests", "--image-name", "").MustFail(t, 2, "must not be empty")
}

func TestLintCommand(t *testing.T) {
	seed := testutil.Testdata("seed", "capo-flatcar-issue.yaml")
	r := testutil.Run(t, "lint", seed).MustFail(t, 1, "[node-name-metadata]", "fix:", "10 error(s)", "line 9, column 7")
	if !strings.Contains(r.Stdout, "capo-flatcar-issue.yaml:184: error [node-name-metadata] KubeadmConfigTemplate org-giantswarm/galaxy-galaxy-flatcar-lon-1") {
		t.Fatalf("finding not located by file, line, document:\n%s", r.Stdout)
	}

	r = testutil.Run(t, "lint", "-o", "json", seed)
	var rep capo.LintReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || r.Code != 1 {
		t.Fatalf("exit %d, -o json: %v\n%s", r.Code, err, r.Stdout)
	}
	if rep.Errors != 10 || rep.Documents != 3 || rep.CAPIVersion != capo.NewestCAPIVersion {
		t.Fatalf("report %+v", rep)
	}

	good, _ := os.ReadFile(testutil.Testdata("lint", "good.yaml"))
	r = testutil.RunCmd(t, testutil.Cmd{Args: []string{"lint", "-"}, Stdin: string(good)}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "8 document(s) checked for CAPI 1.13.0: 0 error(s), 0 warning(s)") {
		t.Fatalf("stdin lint: %s", r.Stdout)
	}
	// Warnings alone do not fail CI.
	testutil.Run(t, "lint", testutil.Testdata("lint", "unknown-field.yaml")).MustSucceed(t)
	// Several files: an old and a new state of one KubeadmControlPlane.
	testutil.Run(t, "lint", "--capi-version", "v1.3.5", testutil.Testdata("lint", "format-change.yaml")).
		MustFail(t, 1, "[format-immutable]", "CAPI 1.3.5 refuses")
	testutil.Run(t, "lint", "--capi-version", "1.3.6", testutil.Testdata("lint", "format-change.yaml")).MustSucceed(t)

	testutil.Run(t, "lint").MustFail(t, 2, "FILE")
	testutil.Run(t, "lint", "--capi-version", "latest", seed).MustFail(t, 2, "--capi-version")
	testutil.Run(t, "lint", filepath.Join(t.TempDir(), "missing.yaml")).MustFail(t, 1, "reading", "missing.yaml")
}

// --image-ref and --image-source as users type them: the ORC Image is in the output and
// validated; what cannot work is a usage error naming the missing piece.
func TestManifestsImageRefFlags(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-ref", "orc", "--image-name", "flatcar-stable-4459.2.0").MustSucceed(t)
	if !strings.Contains(r.Stdout, "kind: Image") || !strings.Contains(r.Stdout, "imageRef:") || !strings.Contains(r.Stderr, "Validated 9 documents") {
		t.Errorf("--image-ref orc:\n%s\n%s", r.Stdout, r.Stderr)
	}
	sum := strings.Repeat("0f", 64)
	r = testutil.Run(t, "manifests", "--image-source", "https://images.example/flatcar.qcow2", "--image-sha512", sum).MustSucceed(t)
	if !strings.Contains(r.Stdout, "managementPolicy: managed") || !strings.Contains(r.Stdout, "value: "+sum) {
		t.Errorf("--image-source:\n%s", r.Stdout)
	}
	testutil.Run(t, "manifests", "--image-source", "https://images.example/flatcar.qcow2").MustFail(t, 2, "sha512", "--from-record")
	testutil.Run(t, "manifests", "--image-ref", "id").MustFail(t, 2, "--image-id")
	testutil.Run(t, "manifests", "--image-id", "x").MustFail(t, 2, "--image-ref id or orc")
	testutil.Run(t, "manifests", "--image-ref", "glance").MustFail(t, 2, "invalid --image-ref")
	testutil.Run(t, "manifests", "--from-record", "/nonexistent.build.json").MustFail(t, 2, "--from-record")
}
