package glance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// lint --cloud checks that the manifests' image filter matches exactly one active image.
func TestLintImageFilterAgainstGlance(t *testing.T) {
	needOpenStack(t)
	manifest, err := os.ReadFile(testutil.Testdata("lint", "good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const name = "flatcar-capo-lint-image"
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	os.WriteFile(path, []byte(strings.ReplaceAll(string(manifest), "flatcar-stable-4459.2.0-kube-v1.33.4", name)), 0o644)
	lint := func() testutil.Result {
		return testutil.RunCmd(t, testutil.Cmd{
			Args: []string{"lint", path, "--cloud", "local"},
			Env:  []string{"OS_CLIENT_CONFIG_FILE=" + stack.env["OS_CLIENT_CONFIG_FILE"]},
		})
	}
	lint().MustFail(t, 1, "image-filter", "matches 0 active images")
	upload(t, nil, rawImage(t, t.TempDir(), 71, 4<<20), "--name", name, "--cloud", "local", "--min-disk", "20").MustSucceed(t)
	r := lint().MustSucceed(t)
	if strings.Contains(r.Combined(), "image-filter") || strings.Contains(r.Combined(), "root-volume-min-disk") {
		t.Fatalf("lint still reports the image filter, or a root volume the manifest does not have:\n%s", r.Combined())
	}
	// A 10 GiB root volume for an image whose min_disk is 20: Nova would refuse it (a warning).
	withRoot := strings.Replace(strings.ReplaceAll(string(manifest), "flatcar-stable-4459.2.0-kube-v1.33.4", name),
		"      image:\n", "      rootVolume:\n        sizeGiB: 10\n      image:\n", 1)
	os.WriteFile(path, []byte(withRoot), 0o644)
	if r := lint().MustSucceed(t); !strings.Contains(r.Combined(), "root-volume-min-disk") || !strings.Contains(r.Combined(), "min_disk of 20 GiB") {
		t.Fatalf("lint --cloud does not warn about the 10 GiB root volume:\n%s", r.Combined())
	}
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"lint", path, "--cloud", "nosuchcloud"},
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + stack.env["OS_CLIENT_CONFIG_FILE"]}}).MustFail(t, 2, "nosuchcloud")
}
