package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// A test that needs what a background build script makes waits while the script holds its lock
// (a fresh machine's tests start while install-deps.sh's background builds run), and not longer.
func TestWaitForScriptWaitsWhileTheLockIsHeld(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, ".build.lock")
	holder, err := os.Create(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if ok, err := filelock.TryLock(holder, filelock.Exclusive); !ok || err != nil {
		t.Fatalf("taking the lock: %v %v", ok, err)
	}
	made := filepath.Join(dir, "made")
	go func() {
		time.Sleep(time.Second)
		_ = os.WriteFile(made, nil, 0o600)
		time.Sleep(500 * time.Millisecond)
		_ = filelock.Unlock(holder)
	}()
	start := time.Now()
	WaitForScript(t, "install-x.sh", lock, filepath.Join(dir, "build.log"), func() bool { _, err := os.Stat(made); return err == nil })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("returned after %s, before the script made its output or let go of its lock", d)
	}
	if _, err := os.Stat(made); err != nil {
		t.Fatalf("returned without the output: %v", err)
	}

	// Not held (the script is done or never ran): no wait.
	start = time.Now()
	WaitForScript(t, "install-x.sh", lock, filepath.Join(dir, "build.log"), func() bool { return false })
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waited %s for a lock nobody holds", d)
	}
}
