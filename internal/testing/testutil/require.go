package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// The two tiers. Plain `go test ./...` is the fast tier: pure Go, no VM, no root, no external
// tool or service, passing on a machine with only Go (every Require* skips). RealEnv=1 is the
// real tier: the tests that boot VMs, run Keystone/Glance, registries, containerd, packer, mkfs,
// the node proof. `make test`, race, fuzz, node-proof, capo-proof, the benchmarks and .ci/run set
// it; nothing else does, so QEMU or mkfs on a contributor's PATH never turns the quick loop into
// the half-hour suite.
const RealEnv = "FLATCAR_CAPO_REAL_TESTS"

// realTier reports whether this is the real tier (FLATCAR_CAPO_REAL_TESTS=1).
func realTier() bool { return os.Getenv(RealEnv) == "1" }

// unit reports whether this is the fast tier, the default: every Require* skips.
func unit() bool { return !realTier() }

// strictEnv names the variable that turns every skip of this file into a failure. .ci/run and
// `make test STRICT=1` set it: on CI a missing tool or missing root is a broken machine, and a
// skipped test would let missing coverage look green. Strict without RealEnv fails every
// real-parts test too: a strict run that forgot the switch would otherwise skip them all.
const strictEnv = "FLATCAR_CAPO_STRICT_TESTS"

// strict reports whether skips are failures (FLATCAR_CAPO_STRICT_TESTS=1).
func strict() bool { return os.Getenv(strictEnv) == "1" }

// unitSkip skips a real-parts test in the fast tier; in strict mode it fails instead, naming
// the switch (strict means nothing may be left out).
func unitSkip(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if strict() {
		t.Fatalf("%s, but %s is not 1 (the fast tier) and %s=1 forbids leaving it out: set %s=1 (make test does)", msg, RealEnv, strictEnv, RealEnv)
	}
	t.Skipf("SKIP (fast tier; %s=1 runs it): %s", RealEnv, msg)
}

// The only ways a test may skip. Every skip goes through here so strict mode can refuse it.

// RequireTool skips the test, or fails it in strict mode, when tool is not on PATH.
func RequireTool(t testing.TB, tool string) {
	t.Helper()
	if _, known := tools[tool]; !known {
		t.Fatalf("testutil: %s is not in testutil's tools list (tools.go): add it there with the scripts/install-deps.sh profile that installs it", tool)
	}
	if unit() {
		unitSkip(t, "needs %s", tool)
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
	if unit() {
		unitSkip(t, "%s needs root", why)
	}
	if !isRoot() {
		skip(t, "%s needs root (CI runs as root)", why)
	}
}

// RequireEnv skips the test, or fails it in strict mode, when a precondition of the machine
// (not of the code under test) does not hold: err says what is missing, what names the need.
func RequireEnv(t testing.TB, err error, what string) {
	t.Helper()
	if unit() {
		unitSkip(t, "%s", what)
	}
	if err != nil {
		skip(t, "%s: %v", what, err)
	}
}

// RequireReal skips the test in the fast tier (fails it in strict mode) when what it needs (a VM,
// a service, a tool) is checked only later, after work the fast tier should not spend: call it
// first. In the real tier it does nothing; the later Require* still check the machine.
func RequireReal(t testing.TB, what string) {
	t.Helper()
	if unit() {
		unitSkip(t, "%s", what)
	}
}

// Slow skips, in the fast tier, a pure-Go test that takes too long for it (over ~30 s: an
// exhaustive matrix of command runs, a real timeout waited out); why says what makes it slow.
// In the real tier (make test, CI) it runs as before; strict mode fails the skip like any other.
func Slow(t testing.TB, why string) {
	t.Helper()
	RequireReal(t, "takes too long: "+why)
}

// HaveRoot is for a test that checks more as root: it reports whether it runs as root and, when
// not, logs what is left out (fails the test in strict mode, where nothing may be left out).
func HaveRoot(t testing.TB, what string) bool {
	t.Helper()
	if isRoot() && realTier() {
		return true
	}
	if strict() && unit() {
		t.Fatalf("%s needs root and %s=1 (make test sets it); %s=1 forbids leaving it out", what, RealEnv, strictEnv)
	}
	if strict() {
		t.Fatalf("%s needs root; %s=1 forbids leaving it out", what, strictEnv)
	}
	if unit() {
		t.Logf("SKIP part (fast tier; %s=1 runs it): %s needs root", RealEnv, what)
	} else {
		t.Logf("SKIP part: %s needs root (CI runs as root)", what)
	}
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

// small reports whether tests keep their inputs small: under -short (the race run of make test,
// where the race detector makes everything ~10x slower) and in the fast tier, which must answer
// in minutes; the real tier (make test) runs the full sizes.
func small() bool { return testing.Short() || unit() }

func skip(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if strict() {
		t.Fatalf("%s; %s=1 makes this a failure, not a skip", msg, strictEnv)
	}
	t.Skipf("SKIP: %s", msg)
}

// isRoot reports whether the tests run as root (CI does).
func isRoot() bool { return os.Geteuid() == 0 }

// RequireOptIn skips a test that only runs when asked for by env=1 (a proof too long for `make
// test`, which its own make target runs). Strict mode allows this skip: not asking is the runner's
// choice, not a broken machine; the make target sets the variable and strict mode together.
func RequireOptIn(t testing.TB, env, what string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("SKIP: %s runs only with %s=1", what, env)
	}
}
