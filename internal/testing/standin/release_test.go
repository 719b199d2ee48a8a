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
