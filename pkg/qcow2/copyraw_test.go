package qcow2

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// CopyToRaw skips the truncate on an empty output (ext4 would flush it on close) but must still
// empty one that holds old data: otherwise stale bytes would show through the holes.
func TestCopyToRawEmptiesAnOldOutput(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	in, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	src, err := NewRawSource(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []int64{0, testDiskSize + 1<<20} {
		out := filepath.Join(dir, "out.raw")
		stale := make([]byte, old)
		for i := range stale {
			stale[i] = 0xa5
		}
		if err := os.WriteFile(out, stale, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(out, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := CopyToRaw(context.Background(), src, f, 2, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sameFile(t, out, raw)
	}
}
