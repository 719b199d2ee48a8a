package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stand-in mkfs.btrfs that fails its mount check the first time, as the real one does when a
// loop device goes away during the check: RunTool runs it again; any other failure is final.
func TestRunToolRetriesMkfsBtrfsMountCheck(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	script := "#!/bin/sh\necho x >>" + count + "\n" +
		"[ \"$1\" = other ] && { echo 'ERROR: not enough free space' >&2; exit 1; }\n" +
		"[ $(wc -l <" + count + ") -ge 2 ] && exit 0\n" +
		"echo 'ERROR: cannot check mount status of img: No such device' >&2; exit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "mkfs.btrfs"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "\n")
	}
	if out, err := RunTool(nil, "mkfs.btrfs", "img"); err != nil || runs() != 2 {
		t.Errorf("RunTool: %v %s after %d runs; want success on the second run", err, out, runs())
	}
	os.Remove(count)
	if _, err := RunTool(nil, "mkfs.btrfs", "other"); err == nil || runs() != 1 {
		t.Errorf("RunTool of a real failure: %v after %d runs; want the failure after one run", err, runs())
	}
}
