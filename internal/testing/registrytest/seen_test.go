package registrytest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
)

// Seen reads the registry's access log: a push shows as its manifest PUT, each entry METHOD PATH.
func TestRegistrySeen(t *testing.T) {
	reg := registrytest.Start(t)
	img, err := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"seen": []byte("seen")}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Push(context.Background(), reg.Host+"/seen/app:v1", img); err != nil {
		t.Fatal(err)
	}
	if seen := reg.Seen(); !slices.Contains(seen, "PUT /v2/seen/app/manifests/v1") {
		t.Errorf("the access log after a push: %q", seen)
	}
	for _, s := range reg.Seen() {
		if method, path, _ := strings.Cut(s, " "); method == "" || !strings.HasPrefix(path, "/v2/") || strings.Contains(path, " ") {
			t.Errorf("access log entry %q: want METHOD /v2/PATH", s)
		}
	}
}
