package images_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

const k8s = "v1.33.4"

// fixture is a real registry holding kubeadm's seven images for k8s.
func fixture(t *testing.T) (*registrytest.Registry, *registrytest.Pushed) {
	t.Helper()
	reg := registrytest.Start(t)
	pushed, err := reg.PushKubeadm(context.Background(), kubetest.KubeadmImages(k8s, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	return reg, pushed
}

func opts(reg *registrytest.Registry, cache string) images.Options {
	m, err := images.ParseMirror("registry.k8s.io=https://" + reg.Host)
	if err != nil {
		panic(err)
	}
	return images.Options{Arch: "amd64", CacheDir: cache, Mirrors: images.Mirrors{m}, CAFile: reg.CAFile}
}

// pullAll pulls every image of the fixture through the mirror into cache.
func pullAll(t *testing.T, reg *registrytest.Registry, pushed *registrytest.Pushed, cache string) *images.Result {
	t.Helper()
	res, err := images.Pull(context.Background(), refs(t, pushed.Refs...), opts(reg, cache))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func refs(t *testing.T, s ...string) []images.Ref {
	t.Helper()
	r, err := images.ParseRefs(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The seven images come through the mirror under kubeadm's names, digests as pushed, the index
// resolved to linux/amd64; a second pull with the same refs transfers nothing.
func TestPullKubeadmImagesThroughMirror(t *testing.T) {
	reg, pushed := fixture(t)
	cache := t.TempDir()
	res := pullAll(t, reg, pushed, cache)
	if len(res.Images) != 7 {
		t.Fatalf("pulled %d images, want 7", len(res.Images))
	}
	for _, im := range res.Images {
		if im.Digest != pushed.Digest[im.Name] || im.ManifestDigest != pushed.Manifest[im.Name] {
			t.Errorf("%s: digest %s manifest %s, pushed %s / %s", im.Name, im.Digest, im.ManifestDigest, pushed.Digest[im.Name], pushed.Manifest[im.Name])
		}
		if im.Platform != "linux/amd64" || im.From != reg.Host {
			t.Errorf("%s: platform %s from %s", im.Name, im.Platform, im.From)
		}
	}
	if res.Transferred == 0 || res.Fetched == 0 {
		t.Fatalf("cold pull transferred %d bytes, %d blobs", res.Transferred, res.Fetched)
	}
	// busybox's layer is shared by all seven: the archive holds it once.
	if res.Size() >= int64(7)*res.Images[0].Size/2 {
		t.Errorf("unique size %d: the shared layer was not deduplicated", res.Size())
	}
	again := pullAll(t, reg, pushed, cache)
	if again.Transferred != 0 || again.Fetched != 0 {
		t.Errorf("warm pull transferred %d bytes (%d blobs), want 0", again.Transferred, again.Fetched)
	}
	// A pin by digest is honoured and needs no registry at all once cached.
	pause := pushed.Index
	r := refs(t, pause+"@"+pushed.Digest[pause])
	reg.Stop()
	pinned, err := images.Pull(context.Background(), r, opts(reg, cache))
	if err != nil {
		t.Fatalf("pinned ref from the cache with the registry down: %v", err)
	}
	if pinned.Images[0].Digest != pushed.Digest[pause] || pinned.Images[0].Name != pause+"@"+pushed.Digest[pause] {
		t.Errorf("pinned: %+v", pinned.Images[0])
	}
}

// arm64 takes the index's arm64 manifest; an amd64-only image is refused, naming what it has.
func TestPullPlatform(t *testing.T) {
	reg, pushed := fixture(t)
	o := opts(reg, t.TempDir())
	o.Arch = "arm64"
	res, err := images.Pull(context.Background(), refs(t, pushed.Index), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Images[0].Platform != "linux/arm64" || res.Images[0].ManifestDigest == pushed.Manifest[pushed.Index] {
		t.Errorf("arm64 pull of the index: %+v", res.Images[0])
	}
	api := pushed.Refs[0]
	_, err = images.Pull(context.Background(), refs(t, api), o)
	if err == nil || !strings.Contains(err.Error(), api) || !strings.Contains(err.Error(), "no linux/arm64") || !strings.Contains(err.Error(), "linux/amd64") {
		t.Fatalf("amd64-only image for arm64: %v", err)
	}
	// An index without the platform names the ref and the platforms it has.
	amd, _ := registrytest.Image{Arch: "amd64"}.Build()
	s390, _ := registrytest.Image{Arch: "s390x"}.Build()
	if _, err := reg.PushIndex(context.Background(), reg.Host+"/multi:v1", amd, s390); err != nil {
		t.Fatal(err)
	}
	o.Mirrors = nil
	_, err = images.Pull(context.Background(), refs(t, reg.Host+"/multi:v1"), o)
	if err == nil || !strings.Contains(err.Error(), reg.Host+"/multi:v1 has no linux/arm64") || !strings.Contains(err.Error(), "linux/amd64, linux/s390x") {
		t.Fatalf("index without arm64: %v", err)
	}
}

// Bad input: each a clear message naming the ref, the registry and the fix; nothing unverified
// is kept in the cache; the password never appears.
func TestPullRefuses(t *testing.T) {
	reg, pushed := fixture(t)
	api := pushed.Refs[0]
	check := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		t.Log(err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
		if strings.Contains(err.Error(), registrytest.Password) {
			t.Errorf("error shows the password: %v", err)
		}
	}
	t.Run("unknown tag", func(t *testing.T) {
		_, err := images.Pull(context.Background(), refs(t, "registry.k8s.io/kube-apiserver:v9.9.9"), opts(reg, t.TempDir()))
		check(t, err, "registry.k8s.io/kube-apiserver:v9.9.9", "no such image", reg.Host, "v9.9.9")
	})
	t.Run("unknown repository", func(t *testing.T) {
		_, err := images.Pull(context.Background(), refs(t, "registry.k8s.io/nope:v1"), opts(reg, t.TempDir()))
		check(t, err, "registry.k8s.io/nope:v1", "no such image", reg.Host)
	})
	t.Run("wrong password", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", reg.DockerConfigWith(t, registrytest.User, "wrong-"+registrytest.Password))
		_, err := images.Pull(context.Background(), refs(t, api), opts(reg, t.TempDir()))
		check(t, err, api, "registry "+reg.Host+" refused the credentials", "docker config")
		if strings.Contains(err.Error(), "wrong-") {
			t.Errorf("error shows the secret: %v", err)
		}
	})
	t.Run("no login", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		_, err := images.Pull(context.Background(), refs(t, api), opts(reg, t.TempDir()))
		check(t, err, api, "refused the credentials", reg.Host)
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		o := opts(reg, t.TempDir())
		o.CAFile = ""
		_, err := images.Pull(context.Background(), refs(t, api), o)
		check(t, err, api, "not trusted", reg.Host, "--registry-ca")
	})
	t.Run("blob digest mismatch", func(t *testing.T) {
		cache := t.TempDir()
		// Damage the blob of api's own layer on the registry's disk: it serves other bytes.
		res, err := images.Pull(context.Background(), refs(t, api), opts(reg, t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		layer := res.Images[0].Blobs[len(res.Images[0].Blobs)-1]
		f := reg.BlobFile(layer.Digest)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		good := append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(f, good, 0o644)
		_, err = images.Pull(context.Background(), refs(t, api), opts(reg, cache))
		check(t, err, api, "wrong content", "refused", layer.Digest.String())
		if _, err := os.Stat(images.BlobPath(cache, layer.Digest)); err == nil {
			t.Error("the damaged blob is in the cache")
		}
		left, _ := filepath.Glob(filepath.Join(cache, "images/blobs/sha256/.tmp-*"))
		if len(left) > 0 {
			t.Errorf("temp files left: %v", left)
		}
	})
	// A registry nobody can reach fails every image alike: one error naming the host, each image
	// once, and the ways out (a mirror, an images file, no preloading), not one dial error per image.
	t.Run("unreachable registry", func(t *testing.T) {
		port, err := testutil.FreePort() // free, so nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		host := fmt.Sprintf("127.0.0.1:%d", port)
		given := []string{host + "/kube-apiserver:v1.33.4", host + "/pause:3.10", host + "/etcd:3.5.21-0"}
		_, err = images.Pull(context.Background(), refs(t, given...), opts(reg, t.TempDir()))
		check(t, err, append(given, "cannot reach registry "+host, "--registry-mirror "+host+"=https://", "--images-file", "--no-preload-images")...)
		if n := strings.Count(err.Error(), "cannot reach"); n != 1 {
			t.Errorf("%d 'cannot reach' in the error, want 1:\n%v", n, err)
		}
		if n := strings.Count(err.Error(), "connection refused"); n != 1 {
			t.Errorf("the dial error is repeated %d times, want once:\n%v", n, err)
		}
	})
	t.Run("unreachable mirror", func(t *testing.T) {
		port, err := testutil.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		m, err := images.ParseMirror(fmt.Sprintf("registry.k8s.io=https://127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		o := opts(reg, t.TempDir())
		o.Mirrors = images.Mirrors{m}
		_, err = images.Pull(context.Background(), refs(t, pushed.Refs...), o)
		check(t, err, fmt.Sprintf("cannot reach mirror 127.0.0.1:%d", port), fmt.Sprintf("for %d image(s)", len(pushed.Refs)), "--no-preload-images")
	})
	t.Run("bad refs", func(t *testing.T) {
		for _, s := range []string{"", "UPPER/case:v1", "registry.k8s.io/pause@sha256:abc", "a b"} {
			if _, err := images.ParseRef(s); err == nil {
				t.Errorf("ParseRef(%q) accepted", s)
			}
		}
		for _, s := range []string{"registry.k8s.io", "=https://x", "registry.k8s.io=ftp://x", "registry.k8s.io=https://x/path"} {
			if _, err := images.ParseMirror(s); err == nil || !strings.Contains(err.Error(), "REGISTRY=URL") {
				t.Errorf("ParseMirror(%q): %v", s, err)
			}
		}
	})
}

// The archive is an OCI layout: oci-layout and index.json first, each blob once, the size
// planned before writing, the images named for `ctr images import`.
func TestArchive(t *testing.T) {
	reg, pushed := fixture(t)
	cache := t.TempDir()
	res := pullAll(t, reg, pushed, cache)
	a, err := images.NewArchive(cache, res.Images)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "images.tar")
	f, _ := os.Create(out)
	n, err := a.WriteTo(context.Background(), f)
	f.Close()
	if err != nil || n != a.Size {
		t.Fatalf("wrote %d of %d: %v", n, a.Size, err)
	}
	if st, _ := os.Stat(out); st.Size() != a.Size {
		t.Fatalf("file %d bytes, planned %d", st.Size(), a.Size)
	}
	f, _ = os.Open(out)
	defer f.Close()
	var names []string
	var idx v1.IndexManifest
	testutil.EachTarEntry(t, f, func(h *tar.Header, body io.Reader) {
		names = append(names, h.Name)
		if h.Name == "index.json" {
			json.NewDecoder(body).Decode(&idx)
		}
	})
	if names[0] != "oci-layout" || names[1] != "index.json" {
		t.Errorf("first entries %v", names[:2])
	}
	seen := map[string]bool{}
	for _, n := range names[2:] {
		if seen[n] {
			t.Errorf("%s twice", n)
		}
		seen[n] = true
	}
	if int64(len(names)-2) != int64(len(seen)) || len(idx.Manifests) != 7 {
		t.Fatalf("%d manifests in index.json", len(idx.Manifests))
	}
	for _, m := range idx.Manifests {
		name := m.Annotations[images.AnnotationImageName]
		if pushed.Digest[name] != m.Digest.String() {
			t.Errorf("index.json names %s -> %s, pushed %s", name, m.Digest, pushed.Digest[name])
		}
		if !seen["blobs/sha256/"+m.Digest.Hex] {
			t.Errorf("%s: its manifest blob is missing", name)
		}
	}
}
