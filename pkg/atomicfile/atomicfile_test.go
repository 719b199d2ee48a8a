package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommitRenamesAndAbortRemoves(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.img")
	f, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("temp file mode %v, want 0600", st.Mode().Perm())
	}
	f.WriteString("hello")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("output visible before commit: %v", err)
	}
	if err := f.Commit(0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "hello" {
		t.Fatalf("content %q", b)
	}
	g, _ := Create(filepath.Join(dir, "other"))
	g.WriteString("x")
	g.Abort()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("abort left files behind: %v", ents)
	}
}

// RemoveLive (the process exiting without waiting for cleanup) removes the temp files still
// open and only those.
func TestRemoveLive(t *testing.T) {
	dir := t.TempDir()
	kept, _ := Create(filepath.Join(dir, "kept"))
	if err := kept.Commit(0o644); err != nil {
		t.Fatal(err)
	}
	open, _ := Create(filepath.Join(dir, "open"))
	defer open.Abort()
	RemoveLive()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "kept" {
		t.Fatalf("after RemoveLive: %v", ents)
	}
}
