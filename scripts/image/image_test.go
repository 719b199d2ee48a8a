package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// TestImageReproducibleAndMultiArch: the same inputs give the same index digest and the same
// oci-archive bytes; the index has an amd64 and an arm64 image, each run as the non-root user
// with the binary, CA certificates and a /work directory that user owns.
func TestImageReproducibleAndMultiArch(t *testing.T) {
	dir := t.TempDir()
	bin, ca := filepath.Join(dir, "bin"), filepath.Join(dir, "ca.crt")
	os.WriteFile(bin, []byte("\x7fELF stand-in"), 0o755)
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	bins := binaries{"amd64": bin, "arm64": bin}
	epoch := time.Unix(1700000000, 0)
	d1, err := Write(filepath.Join(dir, "a"), bins, ca, "", epoch)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a clock that leaked in would now differ
	d2, err := Write(filepath.Join(dir, "b"), bins, ca, "", epoch)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.tar"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.tar"))
	if d1 != d2 || string(a) != string(b) {
		t.Fatalf("two writes differ: %s vs %s (archives equal: %v)", d1, d2, string(a) == string(b))
	}
	if d3, _ := Write(filepath.Join(dir, "c"), bins, ca, "", epoch.Add(time.Second)); d3 == d1 {
		t.Error("SOURCE_DATE_EPOCH does not reach the image")
	}
	p, err := layout.FromPath(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	top, _ := p.ImageIndex()
	tm, _ := top.IndexManifest()
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "flatcar-capo:latest" {
		t.Fatalf("index.json: %+v", tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	seen := map[string]bool{}
	for _, m := range im.Manifests {
		seen[m.Platform.Architecture] = true
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := img.ConfigFile()
		if cfg.Config.User != "65532:65532" || cfg.Architecture != m.Platform.Architecture || !cfg.Created.Time.Equal(epoch) {
			t.Errorf("%s: user %q arch %q created %v", m.Platform.Architecture, cfg.Config.User, cfg.Architecture, cfg.Created)
		}
		layers, _ := img.Layers()
		rc, _ := layers[0].Uncompressed()
		files := map[string]*tar.Header{}
		testutil.EachTarEntry(t, rc, func(h *tar.Header, _ io.Reader) { files[h.Name] = h })
		for _, want := range []string{"usr/local/bin/flatcar-capo", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
			if files[want] == nil {
				t.Errorf("%s: no %s in the layer", m.Platform.Architecture, want)
			}
		}
		if w := files["work/"]; w == nil || w.Uid != User {
			t.Errorf("%s: /work is not owned by the image's user: %+v", m.Platform.Architecture, w)
		}
	}
	if !seen["amd64"] || !seen["arm64"] {
		t.Errorf("platforms %v", seen)
	}
}
