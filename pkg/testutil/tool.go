package testutil

import (
	"os/exec"
	"strings"
	"testing"
)

// MustRun runs a tool and returns its combined output; when the tool fails, so does the test,
// with that output.
func MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
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
