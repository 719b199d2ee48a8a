package fetch_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

const (
	currentVersion = "4230.2.3"
	oldVersion     = "3510.2.8" // before 3602.2.0: .bz2 only
	imgName        = "flatcar_production_qemu_image.img"
)

// world is a release server with a current release (.img and .bz2) and an old one (.bz2 only),
// a keyring file, a cache and an empty working directory for the output.
type world struct {
	srv              *fetchtest.Server
	key              *fetchtest.Key
	cur, old         fetchtest.Release
	keyring          string
	cache, dir, base string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	now := time.Now()
	w := &world{srv: fetchtest.NewServer(t), key: fetchtest.NewKey(t, "Test Buildbot", now)}
	// A world-readable base so that privilege-dropping tests can read the keyring.
	base, err := os.MkdirTemp("", "fetch-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	w.base = base
	w.keyring = filepath.Join(base, "keyring.asc")
	os.WriteFile(w.keyring, w.key.PublicArmored(t), 0o644)
	w.cache = filepath.Join(base, "cache")
	w.dir = filepath.Join(base, "work")
	os.Mkdir(w.dir, 0o755)
	w.cur = fetchtest.Release{Channel: "stable", Arch: "amd64", Version: currentVersion, Image: "qemu",
		Content: fetchtest.Image(3<<20, 1), Signer: w.key.Current, Key: w.key, SignedAt: now.Add(-time.Hour), Current: true}
	w.old = fetchtest.Release{Channel: "stable", Arch: "amd64", Version: oldVersion, Image: "qemu",
		Content: fetchtest.Image(2<<20, 2), Signer: w.key.Expired, Key: w.key, SignedAt: now.Add(-30 * 30 * 24 * time.Hour), WithoutImg: true}
	w.srv.Publish(t, w.cur)
	w.srv.Publish(t, w.old)
	return w
}

// args are the flags a run of verb needs to use this world.
func (w *world) args(verb string, extra ...string) []string {
	a := []string{verb, "--release-server", w.srv.ReleaseServer(), "--retries", "1"}
	if verb == "fetch" {
		a = append(a, "--keyring", w.keyring, "--cache-dir", w.cache, "--quiet")
	}
	return append(a, extra...)
}

func (w *world) run(t *testing.T, verb string, extra ...string) testutil.Result {
	t.Helper()
	return testutil.RunCmd(t, testutil.Cmd{Args: w.args(verb, extra...), Dir: w.dir})
}

// testRun is run without --quiet, to see the notes on stderr.
func (w *world) testRun(t *testing.T, verb string, extra ...string) testutil.Result {
	t.Helper()
	args := w.args(verb, extra...)
	for i, a := range args {
		if a == "--quiet" {
			args = append(args[:i:i], args[i+1:]...)
			break
		}
	}
	return testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: w.dir})
}

func newKeyArmored(t *testing.T) []byte {
	return fetchtest.NewKey(t, "Another Buildbot", time.Now()).PublicArmored(t)
}

// mustHave fails unless path holds exactly want.
func mustHave(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d bytes published", path, len(got), len(want))
	}
}

// mustBeEmpty fails when the output directory holds anything (an output or a temp file).
func mustBeEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind in the output directory: %s", e.Name())
	}
}

// cachedFiles lists the verified files in the cache (not .partial, .lock or DIGESTS).
func cachedFiles(t *testing.T, cache string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".img") || strings.HasSuffix(p, ".bz2")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}
