package images_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// The build host pulls as the node's hosts.toml says: two mirrors for registry.k8s.io in the
// order given, the first down (a closed port on 127.0.0.1), the second a Harbor-like
// path-prefixed project (https://HOST/v2/k8s-cache, override_path) in front of the real
// registry. Every image comes from the second, and the proxy saw only /v2/k8s-cache/ paths.
func TestPullOrderedMirrorsPathPrefix(t *testing.T) {
	reg, pushed := fixture(t)
	proxy := registrytest.StartPrefixProxy(t, reg, "k8s-cache")
	t.Setenv("DOCKER_CONFIG", reg.DockerConfigFor(t, reg.Host, proxy.Host))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now: the first mirror is down
	ms, err := images.ParseMirrors([]string{
		"registry.k8s.io=http://" + down,
		fmt.Sprintf("registry.k8s.io=http://%s/v2/k8s-cache", proxy.Host),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := images.Pull(context.Background(), refs(t, pushed.Refs...), images.Options{Arch: "amd64", CacheDir: t.TempDir(), Mirrors: ms})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range res.Images {
		if im.From != proxy.Host || im.Digest != pushed.Digest[im.Name] {
			t.Errorf("%s from %s digest %s, want from %s digest %s", im.Name, im.From, im.Digest, proxy.Host, pushed.Digest[im.Name])
		}
	}
	seen := proxy.Seen()
	var manifests int
	for _, s := range seen {
		p := strings.SplitN(s, " ", 2)[1]
		if p != "/v2/" && !strings.HasPrefix(p, "/v2/k8s-cache/") {
			t.Errorf("the proxy was asked %s, outside its project", s)
		}
		if strings.Contains(p, "/manifests/") {
			manifests++
		}
	}
	if manifests < len(pushed.Refs) {
		t.Errorf("the proxy served %d manifest requests for %d images: %v", manifests, len(pushed.Refs), seen)
	}
	// Only the down mirror: the error names it and says what failed.
	only, _ := images.ParseMirrors([]string{"registry.k8s.io=http://" + down})
	_, err = images.Pull(context.Background(), refs(t, pushed.Refs[0]), images.Options{Arch: "amd64", CacheDir: t.TempDir(), Mirrors: only})
	if err == nil || !strings.Contains(err.Error(), down) {
		t.Errorf("pull from a down mirror: %v", err)
	}
}
