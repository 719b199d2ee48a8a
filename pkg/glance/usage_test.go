package glance_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// deadCloudsYAML is a clouds.yaml whose Keystone is a closed port on 127.0.0.1: a command that
// tries to authenticate fails with "unreachable" (exit 1), so a test expecting a usage error
// (exit 2) proves the command decided without a Keystone.
func deadCloudsYAML(t *testing.T) string {
	t.Helper()
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	doc := fmt.Sprintf("clouds:\n  dead:\n    auth:\n      auth_url: http://%s/v3\n      username: demo\n      password: secret\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n  dead-two:\n    auth:\n      auth_url: http://%s/v3\n", addr, addr)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Usage and input errors of upload are found before any cloud is contacted: no Keystone runs.
func TestUploadUsageErrorsNeedNoCloud(t *testing.T) {
	dir := t.TempDir()
	yaml := deadCloudsYAML(t)
	img := rawImage(t, dir, 7, 1<<20)
	bz := filepath.Join(dir, "flatcar.img.bz2")
	os.WriteFile(bz, append([]byte("BZh91AY&SY"), make([]byte, 1014)...), 0o644)
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not an image\n"), 0o644)
	none := "OS_CLIENT_CONFIG_FILE=" + filepath.Join(dir, "none.yaml")
	cases := []struct {
		name string
		env  string
		args []string
		code int
		want []string
	}{
		{"unknown cloud", "", []string{img, "--cloud", "nope"}, 2, []string{`cloud "nope" is not defined in`, "dead, dead-two"}},
		{"missing clouds.yaml", none, []string{img, "--cloud", "local"}, 2, []string{"no clouds.yaml was found", "none.yaml"}},
		{"no cloud at all", none, []string{img}, 2, []string{"no cloud given", "OS_AUTH_URL"}},
		{"bzip2 file", "", []string{bz, "--cloud", "dead"}, 1, []string{"not a qcow2 or raw disk image", "bzip2-compressed"}},
		{"text file", "", []string{text, "--cloud", "dead"}, 2, []string{"not a qcow2 or raw disk image", "512-byte sectors"}},
		{"property without value", "", []string{img, "--cloud", "dead", "--property", "os_distro"}, 2, []string{`invalid --property "os_distro"`, "KEY=VALUE"}},
		{"reserved property", "", []string{img, "--cloud", "dead", "--property", "status=active"}, 2, []string{`invalid --property "status=active"`, "set by Glance"}},
		{"bad property key", "", []string{img, "--cloud", "dead", "--property", "my key=1"}, 2, []string{`invalid --property "my key=1"`}},
		{"bad visibility", "", []string{img, "--cloud", "dead", "--visibility", "everyone"}, 2, []string{"invalid --visibility"}},
		{"bad disk format", "", []string{img, "--cloud", "dead", "--disk-format", "vmdk"}, 2, []string{"--disk-format"}},
		{"no name", "", []string{img, "--cloud", "dead"}, 2, []string{"--name is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"upload"}, c.args...)
			if c.name != "no name" {
				args = append(args, "--name", "usage-test")
			}
			env := []string{"OS_CLIENT_CONFIG_FILE=" + yaml}
			if c.env != "" {
				env = []string{c.env}
			}
			testutil.RunCmd(t, testutil.Cmd{Args: args, Env: env}).MustFail(t, c.code, c.want...)
		})
	}
}
