package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// StrictEnv names the variable that turns every skip of this file into a failure. .ci/run and
// `make test STRICT=1` set it: on CI a missing tool or missing root is a broken machine, and a
// skipped test would let missing coverage look green.
const StrictEnv = "FLATCAR_CAPO_STRICT_TESTS"

// Strict reports whether skips are failures (FLATCAR_CAPO_STRICT_TESTS=1).
func Strict() bool { return os.Getenv(StrictEnv) == "1" && !Unit() }

// UnitEnv names the variable of `make test-unit`: only the pure-Go tests run, every test that
// needs a tool, root or a machine precondition skips (strict mode or not), so a contributor
// gets an answer in a minute without root or apt.
const UnitEnv = "FLATCAR_CAPO_UNIT_TESTS"

// Unit reports whether this is a unit run (FLATCAR_CAPO_UNIT_TESTS=1).
func Unit() bool { return os.Getenv(UnitEnv) == "1" }

// The only ways a test may skip. Every skip goes through here so strict mode can refuse it.

// RequireTool skips the test, or fails it in strict mode, when tool is not on PATH.
func RequireTool(t testing.TB, tool string) {
	t.Helper()
	if _, known := Tools[tool]; !known {
		t.Fatalf("testutil: %s is not in testutil.Tools: add it there with the scripts/install-deps.sh profile that installs it", tool)
	}
	if Unit() {
		t.Skipf("SKIP (unit run): needs %s", tool)
	}
	if _, err := exec.LookPath(tool); err != nil {
		skip(t, "%s is not installed (run scripts/install-deps.sh)", tool)
	}
}

// RequireTools is RequireTool for each tool.
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		RequireTool(t, tool)
	}
}

// RequireRoot skips the test, or fails it in strict mode, unless it runs as root; why says what
// needs root (CI runs as root).
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if Unit() {
		t.Skipf("SKIP (unit run): %s needs root", why)
	}
	if !IsRoot() {
		skip(t, "%s needs root (CI runs as root)", why)
	}
}

// RequireEnv skips the test, or fails it in strict mode, when a precondition of the machine
// (not of the code under test) does not hold: err says what is missing, what names the need.
func RequireEnv(t testing.TB, err error, what string) {
	t.Helper()
	if Unit() {
		t.Skipf("SKIP (unit run): %s", what)
	}
	if err != nil {
		skip(t, "%s: %v", what, err)
	}
}

// HaveRoot is for a test that checks more as root: it reports whether it runs as root and, when
// not, logs what is left out (fails the test in strict mode, where nothing may be left out).
func HaveRoot(t testing.TB, what string) bool {
	t.Helper()
	if IsRoot() && !Unit() {
		return true
	}
	if Strict() {
		t.Fatalf("%s needs root; %s=1 forbids leaving it out", what, StrictEnv)
	}
	t.Logf("SKIP part: %s needs root (CI runs as root)", what)
	return false
}

// SkipLong skips a slow test under `go test -short`, which the race run of `make test` uses to
// keep its inputs small; the full run covers the test. Strict mode allows this skip: -short is
// the runner's explicit choice, not a broken machine.
func SkipLong(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("SKIP (-short): %s", why)
	}
}

func skip(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if Strict() {
		t.Fatalf("%s; %s=1 makes this a failure, not a skip", msg, StrictEnv)
	}
	t.Skipf("SKIP: %s", msg)
}

// IsRoot reports whether the tests run as root (CI does).
func IsRoot() bool { return os.Geteuid() == 0 }

// RequireOptIn skips a test that only runs when asked for by env=1 (a proof too long for `make
// test`, which its own make target runs). Strict mode allows this skip: not asking is the runner's
// choice, not a broken machine; the make target sets the variable and strict mode together.
func RequireOptIn(t testing.TB, env, what string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("SKIP: %s runs only with %s=1", what, env)
	}
}
