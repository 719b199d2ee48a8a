// Package testutil builds the flatcar-capo binary once per test process and runs it the way a
// user does, so command tests check real exit codes, stdout and stderr.
package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Testdata returns a path under the repository's testdata/ directory.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{RepoRoot(), "testdata"}, elem...)...)
}

// binaryEnv names a flatcar-capo that make built once for every test package (each would
// otherwise link its own, seconds each on a loaded machine).
const binaryEnv = "FLATCAR_CAPO_TEST_BINARY"

// Binary returns the path of a freshly built flatcar-capo (built once per test binary). Not with
// -race under the race detector: that recompiles every dependency (Kubernetes API types
// included) for minutes; the race run of make test runs the in-process tests instead.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(binaryEnv); p != "" {
		return p
	}
	buildOnce.Do(func() { binPath, buildErr = buildShared() })
	if buildErr != nil {
		t.Fatalf("building flatcar-capo: %v", buildErr)
	}
	return binPath
}

// buildShared builds flatcar-capo for plain `go test ./...` (no binaryEnv): every package's test
// process builds into the same bin/test/ of this checkout, one at a time, and go build relinks
// only when the sources changed, so the run links it once instead of once per package (~25 s of
// CPU each). Without a writable checkout, into a directory of this process.
func buildShared() (string, error) {
	dir := filepath.Join(RepoRoot(), "bin", "test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if dir, err = ProcessDir(binDirPrefix); err != nil {
			return "", err
		}
	}
	// World-readable so privilege-dropping tests (setpriv to nobody) can run it.
	os.Chmod(dir, 0o755)
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "flatcar-capo")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flatcar-capo")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
}

const binDirPrefix = "flatcar-capo-bin-"

// ProcessDir makes a temporary directory of this test process (prefix, pid, random) after
// removing those earlier test processes left behind: a test binary has no exit hook without a
// TestMain in every package, so the pid in the name tells a later process when it may go.
func ProcessDir(prefix string) (string, error) {
	removeStale(prefix)
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// removeStale deletes the directories of ProcessDir(prefix) whose pid no longer runs (or that
// predate pids in the name).
func removeStale(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, dir := range dirs {
		minAge := time.Minute // a directory made just now may belong to a process still starting
		pidText, _, hasPid := strings.Cut(strings.TrimPrefix(filepath.Base(dir), prefix), "-")
		if pid, err := strconv.Atoi(pidText); hasPid && err == nil && pid > 0 && processRuns(pid) {
			continue
		} else if !hasPid {
			minAge = 6 * time.Hour // no owner to ask: only when surely no test still runs it
		}
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() || time.Since(info.ModTime()) < minAge {
			continue
		}
		os.RemoveAll(dir)
	}
}

func processRuns(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Result is what a command run produced.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Combined is stdout and stderr together, for message assertions.
func (r Result) Combined() string { return r.Stdout + r.Stderr }

// Cmd describes one run of the binary.
type Cmd struct {
	Args  []string
	Env   []string // added to a minimal environment (PATH, HOME, TMPDIR)
	Dir   string
	Stdin string
	// Prefix runs the binary under another program, e.g. setpriv to drop privileges.
	Prefix []string
	// Binary is another flatcar-capo to run (BinaryWith's); empty: Binary(t).
	Binary string
	// Timeout kills the run after this long and fails the test (0: no limit), so a hang is a
	// failure that names the command rather than a stuck test binary.
	Timeout time.Duration
}

// Run runs flatcar-capo with args and returns its result; it never fails the test by itself.
func Run(t testing.TB, args ...string) Result {
	t.Helper()
	return RunCmd(t, Cmd{Args: args})
}

// RunCmd runs the binary as described by c.
func RunCmd(t testing.TB, c Cmd) Result {
	t.Helper()
	bin := c.Binary
	if bin == "" {
		bin = Binary(t)
	}
	argv := append(append([]string{}, c.Prefix...), bin)
	argv = append(argv, c.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}, c.Env...)
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Timeout > 0 {
		timer := time.AfterFunc(c.Timeout, func() { cmd.Process.Kill() })
		start := time.Now()
		defer func() {
			if !timer.Stop() {
				t.Fatalf("flatcar-capo %v did not finish within %s (killed; it hangs)\nstdout:\n%s\nstderr:\n%s", c.Args, time.Since(start).Round(time.Second), stdout.String(), stderr.String())
			}
		}()
	}
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("running flatcar-capo %v: %v", c.Args, err)
	}
	return res
}

// MustSucceed fails the test unless r exited 0.
func (r Result) MustSucceed(t testing.TB) Result {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// MustFail fails the test unless r exited with code and its output contains every fragment.
func (r Result) MustFail(t testing.TB, code int, fragments ...string) Result {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, code, r.Stdout, r.Stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Combined(), f) {
			t.Fatalf("output lacks %q\nstdout:\n%s\nstderr:\n%s", f, r.Stdout, r.Stderr)
		}
	}
	return r
}

// AsNobody is a Cmd.Prefix that drops root privileges to nobody; tests that use it need root.
var AsNobody = []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
