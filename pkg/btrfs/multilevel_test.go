package btrfs

import (
	"errors"
	"fmt"
	"sort"
	"testing"
)

// TestMultiLevelTree uses an FS tree with internal nodes (hundreds of files, 4 KiB nodes): reads
// go through node search, and writes land in non-root leaves whose first key must not change.
func TestMultiLevelTree(t *testing.T) {
	want := qemuOEM(true)
	for i := 0; i < 400; i++ {
		want[fmt.Sprintf("/many/file-%03d", i)] = []byte(fmt.Sprintf("content %d\n", i))
	}
	img := mkImage(t, mixedSingle, want)
	fs, dev := openImage(t, img)
	if fs.fsTree.level == 0 {
		t.Fatal("FS tree is a single leaf; the test needs internal nodes")
	}
	sameFiles(t, "ReadFile", readAllFS(t, fs, want), want)
	if es, err := fs.list("/many"); err != nil || len(es) != 400 {
		t.Fatalf("ReadDir(/many) = %d entries, %v", len(es), err)
	}
	// mkfs packs leaves differently on each run, so a leaf may be too full for a change: that
	// must be refused without a write, and enough other changes must succeed.
	var rewritten, emptied, created int
	var refusals []error
	try := func(p string, data []byte) bool {
		rec := &recorder{File: dev}
		err := fs.write(rec, p, data)
		if errors.Is(err, errUnsupported) && len(rec.writes) == 0 {
			refusals = append(refusals, err)
			return false
		}
		if err != nil {
			t.Fatalf("WriteFile(%s): %v (%d writes)", p, err, len(rec.writes))
		}
		want[p] = data
		return true
	}
	for i := 0; i < 400; i += 37 {
		p := fmt.Sprintf("/many/file-%03d", i)
		if try(p, []byte("rewritten "+p+"\n")) {
			rewritten++
		}
	}
	// New inodes go after the highest inode number: empty the files with the highest numbers
	// to make room in that leaf (this drops their EXTENT_DATA items).
	for _, p := range highestInodes(t, fs, "/many", 30) {
		if try(p, nil) {
			emptied++
		}
	}
	for i := 0; i < 40 && created < 3; i++ {
		p := fmt.Sprintf("/many/new-%02d", i)
		if try(p, []byte("created "+p+"\n")) {
			created++
		}
	}
	if created == 0 {
		// mkfs numbers inodes after the host's, so on some runs the leaves that a new name
		// needs are full: the refusals above were clean, which is what this case can check.
		t.Logf("no creation fit its leaves on this layout; refusals: %v", refusals)
	}
	if rewritten < 3 || emptied < 10 {
		t.Fatalf("only %d rewrites, %d emptied files fit their leaves; refusals: %v", rewritten, emptied, refusals)
	}
	verifyImage(t, img, want)
}

// highestInodes returns the n entries of dir with the highest inode numbers.
func highestInodes(t *testing.T, fs *FS, dir string, n int) []string {
	t.Helper()
	d, err := fs.resolve("test", dir)
	if err != nil {
		t.Fatal(err)
	}
	var es []dirEntry
	err = fs.walk(fs.fsTree, key{d.ino, typeDirIndex, 0}, key{d.ino, typeDirIndex, maxU64}, func(b *block, slot int) (bool, error) {
		e, err := parseDirItems(b.data(slot))
		es = append(es, e...)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].location.objectID > es[j].location.objectID })
	var out []string
	for _, e := range es[:min(n, len(es))] {
		out = append(out, dir+"/"+e.name)
	}
	return out
}
