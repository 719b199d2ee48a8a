package packer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// fakePacker writes a shell script that plays packer: it prints machine-readable lines, starts
// a child that stands in for QEMU (recording its pid), and ignores SIGTERM when asked to, the
// way a stuck packer would.
func fakePacker(t *testing.T, body string) (path, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "child.pid")
	path = filepath.Join(dir, "packer")
	script := "#!/bin/sh\nPIDFILE=" + pidFile + "\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pidFile
}

func alive(pid int) bool {
	// A zombie still answers kill 0; look at its state.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the fake packer never wrote %s", file)
	return 0
}

func TestExecDriverLinesAndExitCode(t *testing.T) {
	p, _ := fakePacker(t, `echo "1,,ui,say,hello%!(PACKER_COMMA) world"; echo "oops" >&2; exit 3`)
	var lines []string
	err := (&ExecDriver{Packer: p}).Run(context.Background(), Invocation{Args: []string{"build"}, Stdout: func(s string) { lines = append(lines, s) }})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.Stderr, "oops") {
		t.Fatalf("Run = %v, want exit code 3 with its stderr", err)
	}
	if len(lines) != 1 || lines[0] != "1,,ui,say,hello%!(PACKER_COMMA) world" {
		t.Fatalf("stdout lines = %q", lines)
	}
}

// Cancelling ends packer with SIGTERM (a well-behaved packer stops its QEMU itself), and a child
// that outlives packer in its process group is killed.
func TestExecDriverCancelLeavesNoChild(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"packer exits on SIGTERM, child stays", `sleep 300 & echo $! >$PIDFILE; trap 'exit 1' TERM; while :; do sleep 0.1; done`},
		{"packer ignores SIGTERM", `sleep 300 & echo $! >$PIDFILE; trap '' TERM; while :; do sleep 0.1; done`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, pidFile := fakePacker(t, c.body)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				done <- (&ExecDriver{Packer: p, Grace: 2 * time.Second}).Run(ctx, Invocation{Args: []string{"build"}})
			}()
			child := readPid(t, pidFile)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Run after cancel = %v, want context.Canceled", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return 30 s after cancel")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("cancel took %v", d)
			}
			for i := 0; i < 50 && alive(child); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if alive(child) {
				syscall.Kill(child, syscall.SIGKILL)
				t.Fatalf("child %d of the cancelled packer is still running", child)
			}
		})
	}
}

func TestMissingPackerSaysHowToInstall(t *testing.T) {
	cfg := fixture(t)
	t.Setenv("PATH", t.TempDir()) // no packer anywhere
	for _, p := range []string{"", filepath.Join(t.TempDir(), "packer")} {
		cfg.Packer = p
		_, err := Plan(context.Background(), cfg)
		if !errors.Is(err, ErrMissingPacker) {
			t.Fatalf("Plan with packer %q = %v, want ErrMissingPacker", p, err)
		}
		for _, f := range []string{"apt-get install packer", "scripts/install-packer.sh", "--packer"} {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error %q lacks %q", err, f)
			}
		}
	}
}

// A packer >= 1.10 without the QEMU plugin fails the plan (before anything boots) with the
// exact install command.
func TestMissingPluginGivesInstallCommand(t *testing.T) {
	cfg := fixture(t)
	p, _ := fakePacker(t, `case "$1" in version) echo "Packer v1.11.2";; plugins) exit 0;; *) echo "booted!" >&2; exit 9;; esac`)
	cfg.Packer = p
	t.Setenv("PACKER_PLUGIN_PATH", "/nonexistent/plugins")
	_, err := Build(context.Background(), cfg)
	if !errors.Is(err, ErrMissingPlugin) {
		t.Fatalf("Build = %v, want ErrMissingPlugin", err)
	}
	want := "PACKER_PLUGIN_PATH=/nonexistent/plugins " + p + " plugins install github.com/hashicorp/qemu"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks the command %q", err, want)
	}
	// 1.6.6 has QEMU built in: no plugin question asked (the plan then checks for QEMU).
	testutil.RequireTools(t, "qemu-system-x86_64")
	p, _ = fakePacker(t, `case "$1" in version) echo "Packer v1.6.6";; plugins) echo "plugins asked" >&2; exit 7;; *) exit 0;; esac`)
	cfg.Packer = p
	if _, err := Plan(context.Background(), cfg); err != nil {
		t.Fatalf("Plan with packer 1.6.6: %v", err)
	}
}

// Ctrl-C while the VM runs: real packer, real QEMU (booting a blank disk, so packer waits for
// SSH forever). Cancelling must leave no QEMU, no output directory, and say it was interrupted.
func TestCancelDuringBuildLeavesNoQEMU(t *testing.T) {
	testutil.RequireTools(t, "packer", "ssh-keygen", "qemu-system-x86_64", "qemu-img")
	for _, c := range []struct {
		name   string
		packer func(*testing.T) string
	}{
		{"debian-1.6", func(*testing.T) string { return "" }},
		{"1.12-plugin", packer112},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fixture(t)
			cfg.Packer = c.packer(t)
			cfg.MemoryMiB = 256
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiting := make(chan struct{})
			var once bool
			cfg.Log = lineWriter(func(l string) {
				if !once && strings.Contains(l, "Waiting for SSH") {
					once = true
					close(waiting)
				}
			})
			done := make(chan error, 1)
			go func() { _, err := Build(ctx, cfg); done <- err }()
			select {
			case <-waiting:
			case err := <-done:
				t.Fatalf("Build ended before the VM ran: %v", err)
			case <-time.After(5 * time.Minute):
				t.Fatal("packer never started waiting for SSH")
			}
			if !qemuRunning(cfg.OutputDir) {
				t.Fatal("no QEMU process for the build while packer waits for SSH; the test would prove nothing")
			}
			start := time.Now()
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(3 * time.Minute):
				t.Fatal("Build did not return within 3 minutes of the cancel")
			}
			t.Logf("cancel took %s", time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), filepath.Join(cfg.WorkDir, "packer.log")) {
				t.Errorf("Build after cancel = %v, want context.Canceled naming the packer log", err)
			}
			if qemuRunning(cfg.OutputDir) {
				killQEMUUsing(cfg.OutputDir)
				t.Error("a QEMU process of the build survived the cancel")
			}
			if _, err := os.Stat(cfg.OutputDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output directory left behind: %v", err)
			}
		})
	}
}

func qemuRunning(outputDir string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && isQEMU(b) && strings.Contains(string(b), outputDir+"/") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				return true
			}
		}
	}
	return false
}

// Real packer 1.12 with an empty plugin directory: the plan fails before anything boots and
// names the exact install command.
func TestMissingPluginRealPacker112(t *testing.T) {
	testutil.RequireTools(t, "ssh-keygen")
	cfg := fixture(t)
	cfg.Packer = packer112(t)
	empty := t.TempDir()
	t.Setenv("PACKER_PLUGIN_PATH", empty)
	_, err := Build(context.Background(), cfg)
	if !errors.Is(err, ErrMissingPlugin) {
		t.Fatalf("Build = %v, want ErrMissingPlugin", err)
	}
	want := "PACKER_PLUGIN_PATH=" + empty + " " + cfg.Packer + " plugins install github.com/hashicorp/qemu"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if _, err := os.Stat(cfg.WorkDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed plan wrote the build directory: %v", err)
	}
}
