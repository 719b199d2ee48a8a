package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

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
