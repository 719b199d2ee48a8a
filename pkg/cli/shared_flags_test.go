package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Every flag that release, fetch, build and sysext create share takes the same values: a value
// one command accepts, every command with that flag accepts (here they then fail on the closed
// port 127.0.0.1:9, exit 1); a value one refuses, all refuse as a usage error naming the flag
// (exit 2). Before, `build --retries -1` was accepted while `fetch --retries -1` was refused.
func TestSharedFlagsSameVerdictEverywhere(t *testing.T) {
	testutil.Slow(t, "every shared flag's values through every command that has it: ~40 s")
	dir := t.TempDir()
	dead := "http://127.0.0.1:9"
	base := map[string][]string{
		"release": {"release", "--release-server", dead + "/{channel}"},
		"fetch": {"fetch", "--release-server", dead + "/{channel}", "--cache-dir", filepath.Join(dir, "cache"),
			"--output-file", filepath.Join(dir, "out.img")},
		"build": {"build", "--release-server", dead + "/{channel}", "--cache-dir", filepath.Join(dir, "cache"),
			"--output-dir", filepath.Join(dir, "out"), "--kubernetes-version", "v1.33.4",
			"--kubernetes-mirror", dead + "/release", "--github-mirror", dead},
		"sysext create": {"sysext", "create", "--kubernetes-version", "v1.33.4", "--cache-dir", filepath.Join(dir, "cache"),
			"--output-file", filepath.Join(dir, "k8s.raw"), "--kubernetes-mirror", dead + "/release", "--github-mirror", dead},
	}
	// A flag of the same name that means something else there: build --image is a container
	// image to preload (the Flatcar image is build's --base).
	elsewhere := map[string]string{"image": "build"}
	const ok, usage = 1, 2 // valid values end at the dead server (exit 1), invalid ones are usage errors
	for _, tc := range []struct {
		flag   string
		values map[string]int
	}{
		{"channel", map[string]int{"beta": ok, "nightly": usage}},
		{"version", map[string]int{"4459.2.0": ok, "4459": usage, "current-2024": usage}},
		{"arch", map[string]int{"amd64": ok, "arm64": ok, "x86-64": ok, "riscv": usage}},
		{"release-server", map[string]int{dead + "/flatcar": ok, "ftp://mirror/{channel}": usage, "http://": usage}},
		{"retries", map[string]int{"0": ok, "-1": usage, "x": usage}},
		{"stall-timeout", map[string]int{"5s": ok, "-1s": usage, "soon": usage}},
		{"download-timeout", map[string]int{"1m": ok, "-1m": usage, "1": usage}},
		{"keyring", map[string]int{filepath.Join(dir, "missing.asc"): usage}},
		{"insecure-skip-verify", map[string]int{"false": ok, "maybe": usage}},
		{"image", map[string]int{"openstack": ok, "vmware": usage}},
		{"cache-dir", map[string]int{filepath.Join(dir, "other-cache"): ok}},
		{"output", map[string]int{"json": ok, "yaml": usage}},
		{"kubernetes-version", map[string]int{"v1.33.4": ok, "1.33.4.1": usage, "banana": usage}},
		{"kubernetes-mirror", map[string]int{dead + "/k8s": ok, "ftp://mirror": usage}},
		{"github-mirror", map[string]int{dead + "/gh": ok, "mirror.example": usage}},
		{"crictl-version", map[string]int{"v1.33.0": ok, "1.2": usage}},
		{"cni-version", map[string]int{"v1.7.1": ok, "1.7": usage}},
	} {
		for value, want := range tc.values {
			var commands []string
			for name, args := range base {
				if elsewhere[tc.flag] == name {
					continue
				}
				r := testutil.Run(t, append(append(append([]string{}, args...), "--retries", "0"), "--"+tc.flag+"="+value)...)
				if strings.Contains(r.Stderr, "unknown flag: --"+tc.flag) {
					continue // the command does not have this flag
				}
				commands = append(commands, name)
				if r.Code != want || want == usage && !strings.Contains(r.Combined(), "--"+tc.flag) {
					t.Errorf("%s --%s=%s: exit %d, want %d naming the flag (the same for every command):\n%s", name, tc.flag, value, r.Code, want, r.Stderr)
				}
			}
			if len(commands) < 2 {
				t.Errorf("--%s is on %v only: not a shared flag", tc.flag, commands)
			}
		}
	}
}
