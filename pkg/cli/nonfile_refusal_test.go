package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A named pipe, a character device (a link to /dev/zero), an empty file or a directory given as
// IMAGE is refused by every command that opens an image, before any read: exit 2 (a wrong
// argument, as upload already answered a file that is no disk image), a message that
// says what the path is, nothing written. A pipe used to hang every one of them in open(), and
// convert of an empty file or of /dev/zero wrote a 0-byte image and exited 0; the timeout turns
// such a hang into a failure.
func TestEveryImageCommandRefusesNonFiles(t *testing.T) {
	kinds := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is a named pipe (FIFO)"},
		{"link to /dev/zero", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}, "is a character device"},
		{"empty file", func(t *testing.T, p string) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is an empty file"},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
	}
	commands := []struct {
		name string
		args func(in, dir string) []string
	}{
		{"oem show", func(in, dir string) []string { return []string{"oem", "show", in} }},
		{"oem set in place", func(in, dir string) []string { return []string{"oem", "set", in, "--id", "openstack"} }},
		{"oem set copy", func(in, dir string) []string {
			return []string{"oem", "set", in, "--id", "openstack", "--output-file", filepath.Join(dir, "out.raw")}
		}},
		{"inspect", func(in, dir string) []string { return []string{"inspect", in} }},
		{"convert", func(in, dir string) []string { return []string{"convert", in, filepath.Join(dir, "out.qcow2")} }},
		{"convert to raw", func(in, dir string) []string { return []string{"convert", in, filepath.Join(dir, "out.raw")} }},
		// No cloud exists: the file is refused before any connection is tried.
		{"upload", func(in, dir string) []string { return []string{"upload", in, "--name", "x", "--cloud", "none"} }},
		// Refused in the first step, before Kubernetes or anything else is resolved or downloaded.
		{"build --base-image", func(in, dir string) []string {
			return []string{"build", "--method", "sysext", "--base-image", in, "--version", "4459.2.0",
				"--kubernetes-mirror", "http://127.0.0.1:9/", "--github-mirror", "http://127.0.0.1:9/",
				"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", filepath.Join(dir, "out")}
		}},
	}
	for _, c := range commands {
		for _, k := range kinds {
			t.Run(c.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				in := filepath.Join(dir, "flatcar.img")
				k.make(t, in)
				r := testutil.RunCmd(t, testutil.Cmd{Args: c.args(in, dir), Timeout: 60 * time.Second,
					Env: []string{"OS_CLIENT_CONFIG_FILE=" + filepath.Join(dir, "none.yaml")}})
				r.MustFail(t, 2, in, k.want, "not a qcow2 or raw disk image")
				entries, _ := os.ReadDir(dir)
				var left []string
				for _, e := range entries {
					if e.Name() != "flatcar.img" && !strings.HasPrefix(e.Name(), "cache") {
						left = append(left, e.Name())
					}
				}
				if len(left) != 0 {
					t.Fatalf("files left in the directory: %v", left)
				}
			})
		}
	}
}
