package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A test process leaves its built binary behind (no exit hook); the next one removes those
// whose process is gone, and nothing a live process may still run.
func TestRemoveStaleBinaries(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	old := time.Now().Add(-2 * time.Hour)
	mk := func(name string, mtime time.Time) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "flatcar-capo"), []byte("x"), 0o755)
		os.Chtimes(dir, mtime, mtime)
		return dir
	}
	deadPid := 1 << 30 // above any pid_max
	dead := mk(fmt.Sprintf("%s%d-123", binDirPrefix, deadPid), old)
	deadJustMade := mk(fmt.Sprintf("%s%d-124", binDirPrefix, deadPid), time.Now())
	live := mk(fmt.Sprintf("%s%d-125", binDirPrefix, os.Getpid()), old)
	legacyRecent := mk(binDirPrefix+"1055159097", old)
	legacyOld := mk(binDirPrefix+"1055159098", time.Now().Add(-7*time.Hour))
	other := mk("unrelated-dir", old)

	removeStale(binDirPrefix)
	for dir, want := range map[string]bool{dead: false, deadJustMade: true, live: true, legacyRecent: true, legacyOld: false, other: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(dir), got, want)
		}
	}
}
