package packer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

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
			cfg.Log = func(l string) {
				if !once && strings.Contains(l, "Waiting for SSH") {
					once = true
					close(waiting)
				}
			}
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
