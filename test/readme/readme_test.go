package readme_test

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/test/readme"
)

// releaseVersion is the version the stand-in release server publishes as stable's current; the
// README's pinned examples use it too.
const releaseVersion = "4459.2.0"

// kubernetesVersion is the Kubernetes the stand-in mirror serves as stable (and stable-1.36): the
// current upstream release the README's examples name.
const kubernetesVersion = "v1.36.1"

// exampleHost is the placeholder mirror host of the README's air-gapped examples; the test points
// each flag that names it at the matching local server.
const exampleHost = "mirror.example"

// Every flatcar-capo command in README.md's shell blocks runs, in README order and in one working
// directory (so the examples that form a pipeline feed each other), against:
//   - a local release server with a signed Flatcar-layout release (FLATCAR_CAPO_RELEASE_SERVER,
//     FLATCAR_CAPO_KEYRING),
//   - a local Kubernetes mirror with stand-in binaries and .sha256 files
//     (FLATCAR_CAPO_KUBERNETES_MIRROR, FLATCAR_CAPO_GITHUB_MIRROR),
//   - the real Keystone + Glance on 127.0.0.1 (scripts/openstack.sh; OS_CLIENT_CONFIG_FILE names
//     a clouds.yaml with the README's cloud names).
//
// `build` runs with --dry-run appended (the real builds are pkg/imagebuild's end-to-end tests). A line
// must exit 0, or the code its "# exits N" comment names. A block the test cannot run must follow
// readme.SkipMarker (an HTML comment a reader never sees) with a reason; any other line fails the test.
func TestREADMECommands(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4", "mkfs.vfat", "sgdisk", "uwsgi", "keystone-manage", "glance-manage", "glance-api")
	cmds := readmeCommands(t)

	w := newWorld(t)
	for _, c := range cmds {
		c := c
		name := fmt.Sprintf("line%d", c.Number)
		if !t.Run(name, func(t *testing.T) { w.run(t, c) }) {
			t.Logf("README.md:%d failed: %s", c.Number, c.Text)
		}
	}
}

// openREADME opens the repository's README.md, closed when the test ends.
func openREADME(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readmeCommands extracts the commands and fails on any unmarked line that is not one.
func readmeCommands(t *testing.T) []readme.Command {
	t.Helper()
	lines, err := readme.Lines(openREADME(t))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []readme.Command
	for _, l := range lines {
		if l.Skip != "" {
			t.Logf("README.md:%d not run (%s): %s", l.Number, l.Skip, firstLine(l.Text))
			continue
		}
		if l.Lang != "" && !isShell(l.Lang) {
			if strings.Contains(l.Text, "flatcar-capo ") {
				t.Errorf("README.md:%d: a %s block shows flatcar-capo commands but does not follow %s", l.Number, l.Lang, readme.SkipMarker)
			}
			continue
		}
		c, err := readme.Parse(l)
		if err != nil {
			t.Errorf("README.md:%d: the test cannot run %q (%v): fix the line, or move it to a block after %s", l.Number, l.Text, err, readme.SkipMarker)
			continue
		}
		cmds = append(cmds, c)
	}
	if len(cmds) < 10 {
		t.Fatalf("only %d flatcar-capo commands found in README.md: the extraction is broken", len(cmds))
	}
	return cmds
}

func isShell(lang string) bool {
	switch lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// world is the stand-ins and the working directory the README's commands run in.
type world struct {
	dir     string
	env     []string
	mirrors map[string]string // flag -> local replacement of an https://mirror.example/... value
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := t.TempDir()
	w := &world{dir: filepath.Join(base, "work")}
	if err := os.Mkdir(w.dir, 0o755); err != nil {
		t.Fatal(err)
	}

	// Keystone + Glance start in the background (the slowest stand-in) while the release is made.
	openstack := startOpenStack(t, base)

	// The release: a Flatcar-layout qemu image (btrfs OEM with oem_id=qemu, first_boot flag),
	// published as Flatcar does (qcow2 .img, DIGESTS.asc signed by a fresh key) for both the qemu
	// and the openstack image names.
	raw := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	qcow := filepath.Join(base, "release.qcow2")
	testutil.Run(t, "convert", raw, qcow, "--quiet").MustSucceed(t)
	content, err := os.ReadFile(qcow)
	if err != nil {
		t.Fatal(err)
	}
	srv := fetchtest.NewServer(t)
	now := time.Now()
	key := fetchtest.NewKey(t, "README test buildbot", now)
	for _, image := range []string{"qemu", "openstack"} {
		srv.Publish(t, fetchtest.Release{Channel: "stable", Arch: "amd64", Version: releaseVersion, Image: image,
			Content: content, Signer: key.Current, Key: key, SignedAt: now.Add(-time.Hour), Current: true, WithoutBZ2: true})
	}
	keyring := filepath.Join(base, "keyring.asc")
	if err := os.WriteFile(keyring, key.PublicArmored(t), 0o644); err != nil {
		t.Fatal(err)
	}

	kube := kubetest.New(t, kubernetes.Options{Kubernetes: kubernetesVersion})
	clouds := openstack()

	w.mirrors = map[string]string{
		"--release-server":    srv.ReleaseServer(),
		"--kubernetes-mirror": kube.KubernetesMirror(),
		"--github-mirror":     kube.GitHubMirror(),
		"--sysext-url":        srv.URL + "/extensions", // only written into manifests
	}
	w.env = []string{
		"HOME=" + base,
		"XDG_CACHE_HOME=" + filepath.Join(base, "cache"),
		"FLATCAR_CAPO_RELEASE_SERVER=" + srv.ReleaseServer(),
		"FLATCAR_CAPO_KEYRING=" + keyring,
		"FLATCAR_CAPO_KUBERNETES_MIRROR=" + kube.KubernetesMirror(),
		"FLATCAR_CAPO_GITHUB_MIRROR=" + kube.GitHubMirror(),
		"OS_CLIENT_CONFIG_FILE=" + clouds,
		"OS_CLOUD=",
	}
	return w
}

// run runs one README command the way the README shows it, with the stand-ins substituted.
func (w *world) run(t *testing.T, c readme.Command) {
	if err := w.check(t, c); err != nil {
		t.Fatal(err)
	}
}

// check runs c and says how it differs from what the README promises.
func (w *world) check(t *testing.T, c readme.Command) error {
	args, err := w.localArgs(c.Args)
	if err != nil {
		return fmt.Errorf("README.md:%d: %v", c.Number, err)
	}
	if len(args) > 0 && args[0] == "build" && !contains(args, "--dry-run") {
		args = append(args, "--dry-run")
	}
	start := time.Now()
	r := testutil.RunCmd(t, testutil.Cmd{Args: args, Env: append(append([]string{}, w.env...), c.Env...), Dir: w.dir})
	t.Logf("README.md:%d: flatcar-capo %s -> exit %d in %.1f s", c.Number, strings.Join(args, " "), r.Code, time.Since(start).Seconds())
	if r.Code != c.WantCode {
		return fmt.Errorf("README.md:%d: %s\nexit code %d, the README says %d\nstdout:\n%s\nstderr:\n%s", c.Number, c.Text, r.Code, c.WantCode, r.Stdout, r.Stderr)
	}
	if c.Stdout != "" {
		return os.WriteFile(filepath.Join(w.dir, c.Stdout), []byte(r.Stdout), 0o644)
	}
	return nil
}

// localArgs replaces https://mirror.example/... values by the local server for their flag.
func (w *world) localArgs(in []string) ([]string, error) {
	out := append([]string{}, in...)
	for i, a := range out {
		flag, val, inline := a, "", false
		if j := strings.IndexByte(a, '='); strings.HasPrefix(a, "--") && j > 0 {
			flag, val, inline = a[:j], a[j+1:], true
		} else if i > 0 {
			flag, val = out[i-1], a
		}
		u, err := url.Parse(val)
		if err != nil || u.Host != exampleHost {
			continue
		}
		local, ok := w.mirrors[flag]
		if !ok {
			return nil, fmt.Errorf("%s names the example host %s after %s, which the test has no local server for", val, exampleHost, flag)
		}
		if inline {
			out[i] = flag + "=" + local
		} else {
			out[i] = local
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startOpenStack starts Keystone + Glance for this test and returns a function that waits for them
// and returns a clouds.yaml that adds the README's cloud names (mycloud, east, west) to
// scripts/openstack.sh's. They are stopped when the test ends.
func startOpenStack(t *testing.T, base string) (wait func() string) {
	t.Helper()
	up := testutil.StartOpenStack(t, filepath.Join(base, "openstack"))
	return func() string {
		t.Helper()
		orig, err := os.ReadFile(up().CloudsYAML)
		if err != nil {
			t.Fatal(err)
		}
		aliases := "  mycloud:\n    <<: *local\n  east:\n    <<: *local\n  west:\n    <<: *local\n    region_name: RegionTwo\n"
		path := filepath.Join(base, "clouds.yaml")
		if err := os.WriteFile(path, append(bytes.TrimRight(orig, "\n"), []byte("\n"+aliases)...), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
}
