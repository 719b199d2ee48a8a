package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

func TestConventions(t *testing.T) {
	r := testutil.Run(t, "version", "-o", "json").MustSucceed(t)
	var v map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || v["version"] == nil {
		t.Fatalf("version -o json is not a JSON report: %v %q", err, r.Stdout)
	}
	testutil.Run(t, "version", "-o", "yaml").MustFail(t, 2, "must be text or json")
	testutil.Run(t, "no-such-verb").MustFail(t, 2, "unknown command")
	r = testutil.RunCmd(t, testutil.Cmd{Args: []string{"version"}, Env: []string{"FLATCAR_CAPO_OUTPUT=json"}}).MustSucceed(t)
	if !strings.HasPrefix(r.Stdout, "{") {
		t.Fatalf("FLATCAR_CAPO_OUTPUT=json ignored: %q", r.Stdout)
	}
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"version"}, Env: []string{"FLATCAR_CAPO_OUTPUT=xml"}}).
		MustFail(t, 2, "FLATCAR_CAPO_OUTPUT")
	r = testutil.Run(t, "completion", "bash").MustSucceed(t)
	if !strings.Contains(r.Stdout, "flatcar-capo") {
		t.Fatal("completion script does not mention the command")
	}
	r = testutil.Run(t, "--help").MustSucceed(t)
	if !strings.Contains(r.Stdout, "Exit codes") {
		t.Fatal("--help does not teach the conventions")
	}
}
