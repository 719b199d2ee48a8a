package testutil

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// WaitForScript waits, for at most an hour, while a build script (scripts/install-*.sh) holds
// its lock file and ready says no; log is where its output goes when install-deps.sh runs it in
// the background. A fresh machine's tests start while those builds still run.
func WaitForScript(t testing.TB, script, lock, log string, ready func() bool) {
	t.Helper()
	f, err := os.Open(lock)
	if err != nil {
		return // never built here: nothing to wait for
	}
	defer f.Close()
	start := time.Now()
	err = filelock.Wait(context.Background(), f, filelock.Shared, filelock.Options{Poll: 5 * time.Second, Until: start.Add(time.Hour),
		Enough: ready, Busy: func() {
			t.Logf("waiting for %s, running (its output: %s)", script, log)
		}})
	if err != nil && !errors.Is(err, filelock.ErrEnough) {
		t.Logf("%s still runs after %s: %v", script, time.Since(start).Round(time.Second), err)
		return
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %s for %s", d.Round(time.Second), script)
	}
}
