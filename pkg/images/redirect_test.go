package images_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// A mirror that redirects every blob to itself: the pull stops after a bounded number of
// requests (a red team counted 764,132 in 120 s, both cores busy, until the build was killed)
// with a message naming the redirect loop and the URL.
func TestPullStopsABlobRedirectLoop(t *testing.T) {
	reg := registry.New()
	var blobGets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
			blobGets.Add(1)
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host+"/pause:3.10", name.Insecure)
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	m, err := images.ParseMirror("registry.k8s.io=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = images.Pull(ctx, refs(t, "registry.k8s.io/pause:3.10"), images.Options{Arch: "amd64", CacheDir: t.TempDir(), Mirrors: images.Mirrors{m}})
	took := time.Since(start)
	t.Logf("%v after %v and %d blob requests", err, took, blobGets.Load())
	if err == nil || ctx.Err() != nil {
		t.Fatalf("no error, or only the test's timeout: %v", err)
	}
	if n := blobGets.Load(); n > 100 {
		t.Errorf("%d blob requests: the loop was not stopped", n)
	}
	for _, want := range []string{"a redirect loop (it redirects to itself)", srv.URL} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
