package standin

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// BuildQcow2 returns the cached qcow2 of the guest (compressed, compat 0.10: as Flatcar
// publishes its images), converting Build's raw disk on first use.
func BuildQcow2(ctx context.Context, opts Options) (string, error) {
	raw, err := build(ctx, opts)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(raw, ".img") + ".qcow2"
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	unlock, err := lock(ctx, filepath.Dir(raw)+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	start := time.Now()
	if _, err := convert.File(ctx, raw, path, convert.Options{To: disk.FormatQcow2, Compress: true, Compat: "0.10"}); err != nil {
		return "", fmt.Errorf("standin: %w", err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		return "", err
	}
	opts.logf("standin: qcow2 %s made in %s", path, time.Since(start).Round(time.Millisecond))
	return path, nil
}

// ReleaseOptions describe the release PublishRelease puts on the server.
type ReleaseOptions struct {
	// Sysexts are built into the images' /usr as Flatcar's containerd-flatcar is (Options.Sysexts),
	// e.g. registrytest.ContainerdSysext for a real containerd.
	Sysexts []string
	// WithoutSBOM publishes no flatcar_production_image_sbom.json, as releases before Flatcar
	// published SBOMs.
	WithoutSBOM bool
	// Version is the version the release is published as (default Version). Another one, e.g.
	// a newer point release for an upgrade, publishes the same guest under that version (its
	// directory, version.txt, current/ and SBOM), so `build` names its image after it; the
	// guest's own os-release still says Version (rebuilding the guest per version is minutes).
	Version string
}

// Release is what PublishRelease published.
type Release struct {
	Key           *fetchtest.Key
	Keyring       string // the key's armored public half, for --keyring
	ReleaseServer string // for --release-server
	Channel       string
	Version       string
	Images        map[string]fetchtest.Release // by image name: "qemu", "openstack"
	SBOM          []byte                       // the published flatcar_production_image_sbom.json; nil: none
}

// SBOM is an SPDX 2.3 JSON document in the shape of Flatcar's package SBOM of a release
// (flatcar_production_image_sbom.json): the release's packages with their versions and purls.
func SBOM(version string) []byte {
	pkg := func(name, ver string) string {
		return fmt.Sprintf(`{"SPDXID": "SPDXRef-Package-%s", "name": %q, "versionInfo": %q, "downloadLocation": "NOASSERTION",
      "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:ebuild/%s@%s"}]}`,
			strings.ReplaceAll(name, "/", "-"), name, ver, name, ver)
	}
	return []byte(fmt.Sprintf(`{
  "spdxVersion": "SPDX-2.3",
  "dataLicense": "CC0-1.0",
  "SPDXID": "SPDXRef-DOCUMENT",
  "name": "flatcar_production_image-%[1]s",
  "documentNamespace": "https://flatcar.org/spdx/flatcar_production_image-%[1]s",
  "creationInfo": {"created": "2026-01-01T00:00:00Z", "creators": ["Tool: flatcar-capo stand-in"]},
  "packages": [
    %[2]s,
    %[3]s
  ]
}
`, version, pkg("app-containers/containerd", "2.1.5"), pkg("sys-apps/systemd", "256.10")))
}

// PublishRelease publishes the guest as the current stable Flatcar release on srv, version
// opts.Version, by default Version (what the guest's os-release says):
// flatcar_production_qemu_image.img (OEM qemu) and flatcar_production_openstack_image.img
// (OEM openstack), qcow2 as Flatcar's, and Flatcar's package SBOM (unless WithoutSBOM), each
// with DIGESTS, DIGESTS.asc (clear-signed by a fresh test key) and .sig, and version.txt; no .bz2
// (compressing ~200 MB per test is not worth it).
// The images are the cached qcow2 files mapped read-only, not copies on the heap.
func PublishRelease(t testing.TB, srv *fetchtest.Server, opts ReleaseOptions) *Release {
	t.Helper()
	now := time.Now()
	r := &Release{
		Key: fetchtest.NewKey(t, "Flatcar-capo Test Buildbot", now), ReleaseServer: srv.ReleaseServer(),
		Channel: "stable", Version: cmp.Or(opts.Version, Version), Images: map[string]fetchtest.Release{},
	}
	if !opts.WithoutSBOM {
		r.SBOM = SBOM(r.Version)
	}
	r.Keyring = filepath.Join(t.TempDir(), "keyring.asc")
	if err := os.WriteFile(r.Keyring, r.Key.PublicArmored(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, oem := range []string{"qemu", "openstack"} {
		Image(t, Options{OEM: oem, Sysexts: opts.Sysexts}) // fails the test with a clear message if it cannot be built
		path, err := BuildQcow2(context.Background(), Options{OEM: oem, Sysexts: opts.Sysexts, Log: t.Logf})
		if err != nil {
			t.Fatalf("standin: %v", err)
		}
		data, err := mapFile(path)
		if err != nil {
			t.Fatalf("standin: %v", err)
		}
		rel := fetchtest.Release{Channel: r.Channel, Arch: "amd64", Version: r.Version, Image: oem,
			Content: data, Signer: r.Key.Current, Key: r.Key, SignedAt: now.Add(-time.Hour),
			Current: true, WithoutBZ2: true, SBOM: r.SBOM}
		srv.Publish(t, rel)
		r.Images[oem] = rel
	}
	return r
}

var (
	mapMu  sync.Mutex
	mapped = map[string][]byte{}
)

// mapFile maps a cached (read-only, never replaced in place) file for the rest of the process.
func mapFile(path string) ([]byte, error) {
	mapMu.Lock()
	defer mapMu.Unlock()
	if b, ok := mapped[path]; ok {
		return b, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	mapped[path] = b
	return b, nil
}
