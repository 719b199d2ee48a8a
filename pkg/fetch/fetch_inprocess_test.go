package fetch_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// The fetch pipeline in this process (download, resume, hash and bzip2 decode; two fetches at
// once), so the race run of make test sees it; the command tests cover the same paths through
// the binary.
func TestFetchPipelineInProcess(t *testing.T) {
	w := fetchtest.NewWorld(t)
	keyring, err := verify.LoadKeyring(w.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	opts := func(version, compression, out string) fetch.Options {
		return fetch.Options{
			Release:     release.Release{Server: w.Srv.ReleaseServer(), Channel: "stable", Arch: "amd64", Version: version},
			Image:       "qemu",
			Compression: compression,
			OutputFile:  filepath.Join(w.Dir, out),
			CacheDir:    w.Cache,
			Keyring:     keyring,
			Log:         io.Discard,
			Now:         time.Now,
		}
	}
	ctx := context.Background()
	c := httpx.New(httpx.Options{Retries: 2})

	// The .bz2 of the old release, cut twice mid-way: resumed, verified, decoded.
	w.Srv.DropAt(w.Old.BZ2Path(), int64(len(fetchtestBzip2(t, w))/2), 2)
	res, err := fetch.Fetch(ctx, c, opts(fetchtest.OldVersion, "bz2", "old.img"))
	if err != nil {
		t.Fatal(err)
	}
	fetchtest.MustHave(t, res.File, w.Old.Content)
	if !res.Verified || res.Cached || res.Compression != "bz2" {
		t.Fatalf("result %+v", res)
	}
	if n := len(w.Srv.Requests(w.Old.BZ2Path())); n != 3 {
		t.Fatalf("%d requests for the .bz2, want 3 (two cut, then resumed)", n)
	}
	// Again: from the cache, no image download.
	if res, err = fetch.Fetch(ctx, c, opts(fetchtest.OldVersion, "bz2", "old-again.img")); err != nil || !res.Cached {
		t.Fatalf("second fetch: %+v, %v", res, err)
	}
	fetchtest.MustHave(t, res.File, w.Old.Content)

	// The current release's .bz2 and .img side by side.
	done := make(chan error, 2)
	for _, comp := range []string{"bz2", "none"} {
		go func() {
			_, err := fetch.Fetch(ctx, httpx.New(httpx.Options{Retries: 1}), opts(fetchtest.CurrentVersion, comp, "cur-"+comp+".img"))
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, comp := range []string{"bz2", "none"} {
		fetchtest.MustHave(t, filepath.Join(w.Dir, "cur-"+comp+".img"), w.Cur.Content)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "old.img")); err != nil {
		t.Fatal(err)
	}
}

// fetchtestBzip2 is the published .bz2 of the world's old release.
func fetchtestBzip2(t *testing.T, w *fetchtest.World) []byte {
	t.Helper()
	b := w.Srv.Get(w.Old.BZ2Path())
	if len(b) == 0 {
		t.Fatal("the old release has no .bz2")
	}
	return b
}

// FromCache: the verified .img is the cache's own file, downloaded or not; the output is never
// written. A .bz2 is still decompressed into the output.
func TestFetchFromCacheWritesNoOutput(t *testing.T) {
	w := fetchtest.NewWorld(t)
	keyring, err := verify.LoadKeyring(w.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := httpx.New(httpx.Options{Retries: 1})
	o := fetch.Options{Release: release.Release{Server: w.Srv.ReleaseServer(), Channel: "stable", Arch: "amd64", Version: fetchtest.CurrentVersion},
		Image: "qemu", Compression: "none", CacheDir: w.Cache, Keyring: keyring, Log: io.Discard, FromCache: true}
	for i, cached := range []bool{false, true} {
		o.OutputFile = filepath.Join(w.Dir, fmt.Sprintf("out%d.img", i))
		res, err := fetch.Fetch(ctx, c, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Cached != cached || !res.Verified || !strings.HasPrefix(res.File, w.Cache+string(os.PathSeparator)) {
			t.Fatalf("fetch %d: %+v", i, res)
		}
		fetchtest.MustHave(t, res.File, w.Cur.Content)
		if _, err := os.Stat(o.OutputFile); !os.IsNotExist(err) {
			t.Fatalf("fetch %d wrote its output: %v", i, err)
		}
	}
	o.Compression, o.OutputFile = "bz2", filepath.Join(w.Dir, "bz2.img")
	res, err := fetch.Fetch(ctx, c, o)
	if err != nil || res.File != o.OutputFile {
		t.Fatalf("bz2: %+v, %v", res, err)
	}
	fetchtest.MustHave(t, res.File, w.Cur.Content)
}
