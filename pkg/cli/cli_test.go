package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
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

// SIGINT cancels a command; one blocked on a read ignores that, so a second SIGINT ends it: exit
// 130 with a plain message, never "context canceled".
func TestInterruptExits130(t *testing.T) {
	bin := testutil.Binary(t)
	cmd := exec.Command(bin, "lint", "-") // waits on stdin until interrupted
	stdin, _ := cmd.StdinPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	// Not a fixed sleep: on a loaded machine the command may not have its handler yet.
	testutil.WaitIdle(t, cmd.Process.Pid, time.Minute)
	cmd.Process.Signal(os.Interrupt)
	// The second signal ends the read. Should the kernel merge it with the first, the 10 s
	// grace period ends the command the same way: 130, "Interrupted".
	time.Sleep(50 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Interrupted") || strings.Contains(stderr.String(), "context canceled") {
		t.Fatalf("stderr: %q", stderr.String())
	}
}
