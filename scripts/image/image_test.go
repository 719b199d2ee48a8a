package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestImageReproducibleAndMultiArch: the same inputs give the same index digests and the same
// oci-archive bytes; the layout names two indexes, flatcar-capo:latest (amd64 and arm64, the
// binary as entrypoint) and flatcar-capo:shell (the archs given a busybox: /bin/sh and its
// applets, no entrypoint), each image run as the non-root user with the binary, CA certificates,
// a /work directory that user owns and the source/version/revision labels.
func TestImageReproducibleAndMultiArch(t *testing.T) {
	dir := t.TempDir()
	bin, ca, busybox := filepath.Join(dir, "bin"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "busybox")
	os.WriteFile(bin, []byte("\x7fELF stand-in"), 0o755)
	os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	os.WriteFile(busybox, []byte("\x7fELF busybox stand-in"), 0o755)
	epoch := time.Unix(1700000000, 0)
	spec := Spec{Binaries: binaries{"amd64": bin, "arm64": bin}, Shells: binaries{"amd64": busybox}, Certs: ca, Epoch: epoch,
		Ref: "flatcar-capo:latest", ShellRef: "flatcar-capo:shell", Labels: Labels(Source, "v1.2.3", "0123abcd")}
	r1, err := Write(filepath.Join(dir, "a"), spec)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a clock that leaked in would now differ
	r2, err := Write(filepath.Join(dir, "b"), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1) != 2 || r1[0].Archive != filepath.Join(dir, "a.tar") || r1[1].Archive != filepath.Join(dir, "a-shell.tar") {
		t.Fatalf("refs %v", r1)
	}
	for i := range r1 {
		a, _ := os.ReadFile(r1[i].Archive)
		b, _ := os.ReadFile(r2[i].Archive)
		if r1[i].Name != r2[i].Name || r1[i].Digest != r2[i].Digest || len(a) == 0 || string(a) != string(b) {
			t.Fatalf("two writes differ: %v vs %v (archives equal: %v)", r1[i], r2[i], string(a) == string(b))
		}
	}
	later := spec
	later.Epoch = epoch.Add(time.Second)
	if r3, _ := Write(filepath.Join(dir, "c"), later); len(r3) != 2 || r3[0].Digest == r1[0].Digest || r3[1].Digest == r1[1].Digest {
		t.Error("SOURCE_DATE_EPOCH does not reach the images")
	}
	other := spec
	other.Labels = Labels(Source, "v1.2.4", "0123abcd")
	if r4, _ := Write(filepath.Join(dir, "d"), other); len(r4) != 2 || r4[0].Digest == r1[0].Digest {
		t.Error("the version label does not reach the image")
	}
	// Each archive is a layout of its one image (podman load refuses an archive of two).
	for _, r := range r1 {
		ext := filepath.Join(t.TempDir(), "x")
		extract(t, r.Archive, ext)
		lp, err := layout.FromPath(ext)
		if err != nil {
			t.Fatal(err)
		}
		ii, _ := lp.ImageIndex()
		m, _ := ii.IndexManifest()
		if len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != r.Digest || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != r.Name {
			t.Errorf("%s: index.json %+v, want only %v", r.Archive, m.Manifests, r)
		}
	}
	p, err := layout.FromPath(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	top, _ := p.ImageIndex()
	tm, _ := top.IndexManifest()
	if len(tm.Manifests) != 2 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "flatcar-capo:latest" ||
		tm.Manifests[1].Annotations["org.opencontainers.image.ref.name"] != "flatcar-capo:shell" ||
		tm.Manifests[0].Digest.String() != r1[0].Digest || tm.Manifests[1].Digest.String() != r1[1].Digest {
		t.Fatalf("index.json: %+v, want %v", tm.Manifests, r1)
	}
	var latestAMD64Layer v1.Hash
	for i, want := range []struct {
		ref   string
		archs []string
		shell bool
	}{{"latest", []string{"amd64", "arm64"}, false}, {"shell", []string{"amd64"}, true}} {
		idx, err := top.ImageIndex(tm.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		im, _ := idx.IndexManifest()
		var seen []string
		for _, m := range im.Manifests {
			arch := want.ref + "/" + m.Platform.Architecture
			seen = append(seen, m.Platform.Architecture)
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := img.ConfigFile()
			if cfg.Config.User != "65532:65532" || cfg.Architecture != m.Platform.Architecture || !cfg.Created.Time.Equal(epoch) {
				t.Errorf("%s: user %q arch %q created %v", arch, cfg.Config.User, cfg.Architecture, cfg.Created)
			}
			for k, v := range map[string]string{"org.opencontainers.image.source": Source, "org.opencontainers.image.version": "v1.2.3",
				"org.opencontainers.image.revision": "0123abcd", "org.opencontainers.image.created": "2023-11-14T22:13:20Z"} {
				if cfg.Config.Labels[k] != v {
					t.Errorf("%s: label %s = %q, want %q", arch, k, cfg.Config.Labels[k], v)
				}
			}
			if entry := strings.Join(cfg.Config.Entrypoint, " "); want.shell != (entry == "") {
				t.Errorf("%s: entrypoint %q (a shell image has none: GitLab Runner's command is a shell script)", arch, entry)
			}
			layers, _ := img.Layers()
			files := map[string]*tar.Header{}
			for _, l := range layers {
				rc, _ := l.Uncompressed()
				testutil.EachTarEntry(t, rc, func(h *tar.Header, _ io.Reader) { files[h.Name] = h })
			}
			if first, _ := layers[0].Digest(); arch == "shell/amd64" && first != latestAMD64Layer {
				t.Errorf("the shell image does not share the plain image's layer: %s vs %s", first, latestAMD64Layer)
			} else if arch == "latest/amd64" {
				latestAMD64Layer = first
			}
			for _, want := range []string{"usr/local/bin/flatcar-capo", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"} {
				if files[want] == nil {
					t.Errorf("%s: no %s in the layer", arch, want)
				}
			}
			if w := files["work/"]; w == nil || w.Uid != User {
				t.Errorf("%s: /work is not owned by the image's user: %+v", arch, w)
			}
			sh := files["bin/sh"]
			if want.shell != (sh != nil && sh.Typeflag == tar.TypeSymlink && sh.Linkname == "busybox" && files["bin/busybox"] != nil) {
				t.Errorf("%s: /bin/sh is %+v (want a link to busybox only in the shell image)", arch, sh)
			}
		}
		if !slices.Equal(seen, want.archs) {
			t.Errorf("%s: platforms %v, want %v", want.ref, seen, want.archs)
		}
	}
	if _, err := Write(filepath.Join(dir, "e"), Spec{Binaries: binaries{"amd64": bin}, Shells: binaries{"arm64": busybox}, Certs: ca}); err == nil {
		t.Error("a shell for an arch without a binary was accepted")
	}
}

// extract unpacks the tar at path into dir.
func extract(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	testutil.EachTarEntry(t, f, func(h *tar.Header, body io.Reader) {
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			return
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, _ := io.ReadAll(body)
		os.WriteFile(p, b, 0o644)
	})
}
