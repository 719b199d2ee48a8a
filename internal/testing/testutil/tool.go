package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// MustRun runs a tool and returns its combined output; when the tool fails, so does the test,
// with that output.
func MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := RunTool(nil, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RunTool runs a tool with extra environment variables and returns its combined output.
// mkfs.btrfs runs again, up to three times, when it says "cannot check mount status": for that
// check it reads the backing file of every mounted loop device, and fails (ENODEV) when another
// test package's loop mount goes away meanwhile.
func RunTool(env []string, name string, args ...string) ([]byte, error) {
	for try := 1; ; try++ {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil || name != "mkfs.btrfs" || try == 3 || !bytes.Contains(out, []byte("cannot check mount status")) {
			return out, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// QemuImg runs qemu-img (the test needs it) and returns its output.
func QemuImg(t testing.TB, args ...string) string {
	t.Helper()
	RequireTools(t, "qemu-img")
	return MustRun(t, "qemu-img", args...)
}

// MountSquashfs loop-mounts the squashfs image img read-only, as systemd-sysext does, on a new
// directory it returns; the mount goes when the test ends.
func MountSquashfs(t testing.TB, img string) string {
	t.Helper()
	mnt := t.TempDir()
	MustRun(t, "mount", "-t", "squashfs", "-o", "loop,ro", img, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}
