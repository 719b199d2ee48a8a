package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitIdle waits until process pid catches SIGINT and has settled: every thread asleep (state
// S) on several polls in a row, as a command blocked on its input is. A signal sent then reaches
// the command's own handler, not Go's start-up default (which kills the process), however slow
// the machine: a fixed sleep is a guess that a loaded CI machine loses. Fails the test after
// timeout.
func waitIdle(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	settled := 0
	for time.Now().Before(deadline) {
		if catchesSIGINT(pid) && allThreadsSleeping(pid) {
			settled++
			if settled >= 5 {
				return
			}
		} else {
			settled = 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d did not settle within %v", pid, timeout)
}

// catchesSIGINT reads the caught-signals mask of /proc/PID/status.
func catchesSIGINT(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			var mask uint64
			fmt.Sscanf(strings.TrimSpace(v), "%x", &mask)
			return mask&(1<<(2-1)) != 0 // SIGINT is 2
		}
	}
	return false
}

// allThreadsSleeping reports whether every thread of pid is in state S (interruptible sleep).
func allThreadsSleeping(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, s := range stats {
		data, err := os.ReadFile(s)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses and may hold spaces.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 || i+2 >= len(data) || data[i+2] != 'S' {
			return false
		}
	}
	return true
}
