package standin

import (
	"bytes"
	"crypto/sha512"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// TestPublishReleaseFetch: `flatcar-capo fetch` verifies and downloads both published images,
// byte for byte the cached qcow2 files, and each is the guest for its OEM.
func TestPublishReleaseFetch(t *testing.T) {
	srv := fetchtest.NewServer(t)
	rel := PublishRelease(t, srv, ReleaseOptions{})
	if got := srv.Get("/stable/amd64-usr/current/version.txt"); !bytes.Contains(got, []byte("FLATCAR_VERSION="+Version+"\n")) {
		t.Errorf("current/version.txt: %q", got)
	}
	dir := t.TempDir()
	for _, image := range []string{"qemu", "openstack"} {
		out := filepath.Join(dir, image+".img")
		testutil.Run(t, "fetch", "--release-server", rel.ReleaseServer, "--keyring", rel.Keyring,
			"--cache-dir", filepath.Join(dir, "cache"), "--channel", "stable", "--image", image,
			"--output-file", out, "--quiet").MustSucceed(t)
		if want, got := sum(t, rel.Images[image].Content), sumFile(t, out); want != got {
			t.Errorf("%s: fetched image differs from the published one", image)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		format, err := disk.DetectFormat(f)
		f.Close()
		if err != nil || format != disk.FormatQcow2 {
			t.Errorf("%s: fetched image format %v %v, want qcow2", image, format, err)
		}
		if srv.Get(rel.Images[image].BZ2Path()) != nil {
			t.Errorf("%s: a .bz2 was published", image)
		}
		res := testutil.Run(t, "inspect", out, "-o", "json")
		if !strings.Contains(res.Stdout, `"`+image+`"`) {
			t.Errorf("inspect of the %s image does not name its OEM:\n%s%s", image, res.Stdout, res.Stderr)
		}
	}
}

func sum(t *testing.T, b []byte) [64]byte { return sha512.Sum512(b) }

func sumFile(t *testing.T, path string) [64]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [64]byte
	copy(s[:], h.Sum(nil))
	return s
}

// TestPublishReleaseNewerVersion: a second release published with ReleaseOptions.Version on the
// same server becomes the channel's current one, and `flatcar-capo fetch` resolves and verifies
// it (its own key), while the first stays fetchable by its version.
func TestPublishReleaseNewerVersion(t *testing.T) {
	const newer = "4459.2.1"
	srv := fetchtest.NewServer(t)
	old := PublishRelease(t, srv, ReleaseOptions{})
	rel := PublishRelease(t, srv, ReleaseOptions{Version: newer})
	if rel.Version != newer || rel.Images["openstack"].Version != newer {
		t.Fatalf("published %s (openstack image %s), want %s", rel.Version, rel.Images["openstack"].Version, newer)
	}
	if got := srv.Get("/stable/amd64-usr/current/version.txt"); !bytes.Contains(got, []byte("FLATCAR_VERSION="+newer+"\n")) {
		t.Errorf("current/version.txt after the newer release: %q", got)
	}
	if got := srv.Get(rel.Images["openstack"].SBOMPath()); !bytes.Contains(got, []byte("flatcar_production_image-"+newer)) {
		t.Errorf("the newer release's SBOM: %.200q", got)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		rel     *Release
		version []string
	}{{rel, nil}, {old, []string{"--version", Version}}} {
		out := filepath.Join(dir, c.rel.Version+".img")
		res := testutil.Run(t, append([]string{"fetch", "--release-server", c.rel.ReleaseServer, "--keyring", c.rel.Keyring,
			"--cache-dir", filepath.Join(dir, "cache"), "--channel", "stable", "--image", "openstack",
			"--output-file", out, "-o", "json"}, c.version...)...).MustSucceed(t)
		if !strings.Contains(res.Stdout, `"`+c.rel.Version+`"`) {
			t.Errorf("fetch of %s does not report that version:\n%s", c.rel.Version, res.Stdout)
		}
		if sum(t, c.rel.Images["openstack"].Content) != sumFile(t, out) {
			t.Errorf("%s: fetched image differs from the published one", c.rel.Version)
		}
	}
}
