package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestForcedSkip is the child of TestStrictModeFailsSkips: it needs a tool no machine has.
func TestForcedSkip(t *testing.T) {
	if os.Getenv("TESTUTIL_CHILD") != "1" {
		t.Log("runs only as the child of TestStrictModeFailsSkips")
		return
	}
	switch os.Getenv("TESTUTIL_CHILD_KIND") {
	case "tool":
		RequireTool(t, "flatcar-capo-no-such-tool")
	case "env":
		RequireEnv(t, os.ErrPermission, "mounting a tmpfs")
	case "part":
		if !HaveRoot(t, "the kernel mount check") {
			return
		}
	case "present":
		RequireTool(t, "bash") // on PATH here (the fast tier must skip it all the same)
	}
	t.Log("REACHED")
}

// A missing tool (or another unmet precondition) skips the test visibly by default and fails it
// with the reason in strict mode (.ci/run, make test STRICT=1). These runs are the real tier.
func TestStrictModeFailsSkips(t *testing.T) {
	kinds := []string{"tool", "env"}
	if !isRoot() {
		kinds = append(kinds, "part")
	}
	for _, kind := range kinds {
		for _, strict := range []bool{false, true} {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestForcedSkip$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "TESTUTIL_CHILD=1", "TESTUTIL_CHILD_KIND="+kind, strictEnv+"=", RealEnv+"=1")
			if strict {
				cmd.Env = append(cmd.Env, strictEnv+"=1")
			}
			out, err := cmd.CombinedOutput()
			s := string(out)
			switch {
			case strict && (err == nil || !strings.Contains(s, "--- FAIL: TestForcedSkip") || !strings.Contains(s, strictEnv+"=1")):
				t.Errorf("%s, strict: want a failure naming %s, got err %v:\n%s", kind, strictEnv, err, s)
			case !strict && kind != "part" && (err != nil || !strings.Contains(s, "--- SKIP: TestForcedSkip") || !strings.Contains(s, "SKIP: ")):
				t.Errorf("%s: want a visible skip, got err %v:\n%s", kind, err, s)
			case !strict && kind == "part" && (err != nil || !strings.Contains(s, "SKIP part: the kernel mount check needs root")):
				t.Errorf("%s: want a logged partial skip, got err %v:\n%s", kind, err, s)
			case strings.Contains(s, "REACHED") && kind != "part":
				t.Errorf("%s: the test went on after its precondition failed:\n%s", kind, s)
			}
		}
	}
}

// The fast tier (plain `go test`, no RealEnv) skips a real-parts test even when its tool is on
// PATH, so QEMU or mkfs on a contributor's machine never turns it into the half-hour suite; in
// strict mode it fails naming the switch, so a strict run that forgot it cannot pass on skips.
func TestFastTierSkipsRealParts(t *testing.T) {
	for _, kind := range []string{"present", "tool", "env", "part"} {
		for _, strict := range []bool{false, true} {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestForcedSkip$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "TESTUTIL_CHILD=1", "TESTUTIL_CHILD_KIND="+kind, strictEnv+"=", RealEnv+"=")
			if strict {
				cmd.Env = append(cmd.Env, strictEnv+"=1")
			}
			out, err := cmd.CombinedOutput()
			s := string(out)
			switch {
			case strict && (err == nil || !strings.Contains(s, "--- FAIL: TestForcedSkip") || !strings.Contains(s, RealEnv+"=1")):
				t.Errorf("%s, strict fast tier: want a failure naming %s, got err %v:\n%s", kind, RealEnv, err, s)
			case !strict && kind != "part" && (err != nil || !strings.Contains(s, "--- SKIP: TestForcedSkip") || !strings.Contains(s, RealEnv+"=1 runs it")):
				t.Errorf("%s, fast tier: want a skip naming %s, got err %v:\n%s", kind, RealEnv, err, s)
			case !strict && kind == "part" && (err != nil || !strings.Contains(s, "SKIP part (fast tier")):
				t.Errorf("%s, fast tier: want a logged partial skip, got err %v:\n%s", kind, err, s)
			case strings.Contains(s, "REACHED") && kind != "part":
				t.Errorf("%s, fast tier: the real-parts test ran:\n%s", kind, s)
			}
		}
	}
}
