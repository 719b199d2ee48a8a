package fetchtest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

const (
	CurrentVersion = "4230.2.3"
	OldVersion     = "3510.2.8" // before 3602.2.0: .bz2 only
	ImgName        = "flatcar_production_qemu_image.img"
)

// World is a release server with a current release (.img and .bz2) and an old one (.bz2 only),
// a keyring file, a cache and an empty working directory for the output: what the fetch and
// release tests, in process and through the binary, start from.
type World struct {
	Srv              *Server
	Key              *Key
	Cur, Old         Release
	Keyring          string
	Cache, Dir, Base string
}

func NewWorld(t *testing.T) *World {
	t.Helper()
	now := time.Now()
	w := &World{Srv: NewServer(t), Key: NewKey(t, "Test Buildbot", now)}
	// A world-readable base so that privilege-dropping tests can read the keyring.
	base, err := os.MkdirTemp("", "fetch-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	w.Base = base
	w.Keyring = filepath.Join(base, "keyring.asc")
	os.WriteFile(w.Keyring, w.Key.PublicArmored(t), 0o644)
	w.Cache = filepath.Join(base, "cache")
	w.Dir = filepath.Join(base, "work")
	os.Mkdir(w.Dir, 0o755)
	w.Cur = Release{Channel: "stable", Arch: "amd64", Version: CurrentVersion, Image: "qemu",
		Content: image(3<<20, 1), Signer: w.Key.Current, Key: w.Key, SignedAt: now.Add(-time.Hour), Current: true}
	w.Old = Release{Channel: "stable", Arch: "amd64", Version: OldVersion, Image: "qemu",
		Content: image(2<<20, 2), Signer: w.Key.Expired, Key: w.Key, SignedAt: now.Add(-30 * 30 * 24 * time.Hour), WithoutImg: true}
	w.Srv.Publish(t, w.Cur)
	w.Srv.Publish(t, w.Old)
	return w
}

// Args are the flags a run of verb needs to use this world.
func (w *World) Args(verb string, extra ...string) []string {
	a := []string{verb, "--release-server", w.Srv.ReleaseServer(), "--retries", "1"}
	if verb == "fetch" {
		a = append(a, "--keyring", w.Keyring, "--cache-dir", w.Cache, "--quiet")
	}
	return append(a, extra...)
}

// Run runs flatcar-capo verb against this world in its working directory.
func (w *World) Run(t *testing.T, verb string, extra ...string) testutil.Result {
	t.Helper()
	return testutil.RunCmd(t, testutil.Cmd{Args: w.Args(verb, extra...), Dir: w.Dir})
}

// RunWithNotes is Run without --quiet, to see the notes on stderr.
func (w *World) RunWithNotes(t *testing.T, verb string, extra ...string) testutil.Result {
	t.Helper()
	args := slices.DeleteFunc(w.Args(verb, extra...), func(a string) bool { return a == "--quiet" })
	return testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: w.Dir})
}

// MustHave fails unless the file at path holds exactly want (what the server published).
func MustHave(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d bytes published", path, len(got), len(want))
	}
}
