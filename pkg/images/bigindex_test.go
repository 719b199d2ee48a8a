package images_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// indexRegistry serves one tag, pause:3.10, as an OCI index of n entries, none for amd64.
func indexRegistry(t *testing.T, n int) *httptest.Server {
	var b strings.Builder
	b.WriteString(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%064x","size":500,"platform":{"os":"linux","architecture":"s390x","variant":"v%d"}}`, i, i)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
			w.WriteHeader(http.StatusOK)
		case "/v2/pause/manifests/3.10", "/v2/pause/manifests/" + digest:
			w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
			w.Header().Set("Docker-Content-Digest", digest)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			if r.Method == http.MethodGet {
				w.Write(body)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A 300,000-entry index (60 MB) used to fail after 17 s and 567 MB with a 6.2 MB one-line error:
// now it is refused from the size its HEAD gives, at once, with a short message; an index
// within the size limit but with thousands of platforms and none for amd64 lists ten and says
// how many more.
func TestHugeIndexFailsFastAndShort(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []string
	}{
		{300000, []string{"more than a manifest or index can be (4 MiB", "refused"}},
		{10000, []string{"has no linux/amd64 image", "linux/s390x/v0, linux/s390x/v1", "... and 9,990 more"}},
	} {
		t.Run(strconv.Itoa(c.n), func(t *testing.T) {
			srv := indexRegistry(t, c.n)
			m, err := images.ParseMirror("registry.k8s.io=" + srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = images.Pull(context.Background(), refs(t, "registry.k8s.io/pause:3.10"), images.Options{Arch: "amd64", CacheDir: t.TempDir(), Mirrors: images.Mirrors{m}})
			took := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v after %v, %d MB allocated", err, took, alloc>>20)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q", w)
				}
			}
			if len(err.Error()) > 1000 {
				t.Errorf("a %d-byte message", len(err.Error()))
			}
			if took > 5*time.Second || alloc > 200<<20 {
				t.Errorf("took %v and %d MB", took, alloc>>20)
			}
		})
	}
}
