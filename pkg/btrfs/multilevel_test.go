package btrfs

import (
	"fmt"
	"testing"
)

// TestMultiLevelTree uses an FS tree with internal nodes (hundreds of files, 4 KiB nodes): reads
// go through node search, and writes land in non-root leaves whose first key must not change.
func TestMultiLevelTree(t *testing.T) {
	want := qemuOEM(true)
	for i := 0; i < 400; i++ {
		want[fmt.Sprintf("/many/file-%03d", i)] = []byte(fmt.Sprintf("content %d\n", i))
	}
	img := mkImage(t, variants[0], want)
	fs, dev := openImage(t, img)
	if fs.fsTree.level == 0 {
		t.Fatal("FS tree is a single leaf; the test needs internal nodes")
	}
	sameFiles(t, "ReadFile", readAllFS(t, fs, want), want)
	if es, err := fs.ReadDir("/many"); err != nil || len(es) != 400 {
		t.Fatalf("ReadDir(/many) = %d entries, %v", len(es), err)
	}
	for _, p := range []string{"/many/file-000", "/many/file-217", "/many/file-399", "/many/zz-new", "/grub.cfg"} {
		data := []byte("rewritten " + p + "\n")
		if err := fs.WriteFile(dev, p, data); err != nil {
			t.Fatalf("WriteFile(%s): %v", p, err)
		}
		want[p] = data
	}
	verifyImage(t, img, want)
}
