package testutil

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BinaryWith builds a flatcar-capo whose source differs from this checkout's: edit maps a
// repository path (pkg/node/node.go) to a change of its content, which must change it. The
// checkout is not touched (go build -overlay); the binary is the test's. How a test plays an
// upgraded flatcar-capo, e.g. one whose node files changed, against what the current one built.
func BinaryWith(t testing.TB, edit map[string]func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	overlay := map[string]string{}
	for rel, change := range edit {
		b, err := os.ReadFile(filepath.Join(RepoRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		changed := change(string(b))
		if changed == string(b) {
			t.Fatalf("BinaryWith: the edit of %s changes nothing (has the source moved on?)", rel)
		}
		p := filepath.Join(dir, strings.ReplaceAll(rel, "/", "_"))
		if err := os.WriteFile(p, []byte(changed), 0o600); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(RepoRoot(), rel)] = p
	}
	js, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), js, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "flatcar-capo")
	cmd := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, "./cmd/flatcar-capo")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a changed flatcar-capo: %v\n%s", err, out)
	}
	return bin
}
