package standin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A built-in sysext lands in /usr/share/flatcar with its /etc/extensions link, written into a
// copy of USR-A's filesystem by debugfs; a base without Flatcar's directories is refused (debugfs
// itself exits 0 when a command fails).
func TestAddSysexts(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "debugfs", "e2fsck")
	dir := t.TempDir()
	mkfs := func(name string, dirs ...string) string {
		tree := filepath.Join(dir, name+"-tree")
		for _, d := range append(dirs, "bin") {
			os.MkdirAll(filepath.Join(tree, d), 0o755)
		}
		img := filepath.Join(dir, name+".ext4")
		testutil.MustRun(t, "mkfs.ext4", "-q", "-F", "-d", tree, img, "16M")
		return img
	}
	raw := filepath.Join(dir, "containerd-flatcar.raw")
	os.WriteFile(raw, []byte(strings.Repeat("sysext", 100000)), 0o600)
	opts := Options{Sysexts: []string{raw}}
	usr, err := opts.usrName()
	if err != nil || !strings.HasPrefix(usr, "usr-") {
		t.Fatalf("usrName: %q %v", usr, err)
	}
	out := filepath.Join(dir, usr)
	if err := addSysexts(context.Background(), mkfs("usr", "share/flatcar/etc/extensions"), out, opts); err != nil {
		t.Fatal(err)
	}
	if got := debugfsStat(context.Background(), out, "/share/flatcar/etc/extensions/containerd-flatcar.raw"); !strings.Contains(got, "/usr/share/flatcar/containerd-flatcar.raw") {
		t.Errorf("link: %s", got)
	}
	cat, _ := exec.Command("debugfs", "-R", "cat /share/flatcar/containerd-flatcar.raw", out).Output()
	if string(cat) != strings.Repeat("sysext", 100000) {
		t.Errorf("the sysext's content differs in USR-A (%d bytes)", len(cat))
	}
	bad := filepath.Join(dir, "bad.ext4")
	if err := addSysexts(context.Background(), mkfs("plain"), bad, opts); err == nil {
		t.Fatal("a USR-A without /usr/share/flatcar/etc/extensions was accepted")
	}
	if _, err := os.Stat(bad); err == nil {
		t.Fatal("the refused variant was left in place")
	}
	if _, err := (Options{Sysexts: []string{filepath.Join(dir, "x.img")}}).usrName(); err == nil {
		t.Fatal("a sysext not named NAME.raw was accepted")
	}
}
