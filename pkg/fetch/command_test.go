package fetch_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// FetchRelease is `fetch` in one call: the spellings it normalises, the keyring file it loads,
// and every bad value refused before the server sees a request.
func TestFetchReleaseChecksThenFetches(t *testing.T) {
	w := fetchtest.NewWorld(t)
	req := func(mod func(*fetch.Request)) fetch.Request {
		r := fetch.Request{Network: httpx.Options{Retries: 1}, KeyringFile: w.Keyring, Options: fetch.Options{
			Release: release.Release{Server: w.Srv.ReleaseServer(), Channel: "stable", Arch: "x86_64", Version: "current"},
			Image:   "qemu", Compression: fetch.CompressionAuto, OutputFile: filepath.Join(w.Dir, "cur.img"),
			CacheDir: w.Cache, Log: io.Discard}}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	ctx := context.Background()
	res, err := fetch.FetchRelease(ctx, req(nil))
	if err != nil {
		t.Fatal(err)
	}
	fetchtest.MustHave(t, res.File, w.Cur.Content)
	if !res.Verified || res.Arch != "amd64" || res.Version != fetchtest.CurrentVersion {
		t.Fatalf("result %+v: want a verified amd64 %s (x86_64 normalised, current resolved)", res, fetchtest.CurrentVersion)
	}

	w.Srv.ResetRequests()
	bad := map[string]struct {
		mod  func(*fetch.Request)
		want string
	}{
		"arch":        {func(r *fetch.Request) { r.Release.Arch = "sparc" }, "invalid --arch"},
		"image":       {func(r *fetch.Request) { r.Image = "vmware" }, "invalid --image"},
		"retries":     {func(r *fetch.Request) { r.Network.Retries = -1 }, "--retries"},
		"compression": {func(r *fetch.Request) { r.Compression = "xz" }, "invalid --compression"},
		"keyring":     {func(r *fetch.Request) { r.KeyringFile = filepath.Join(w.Dir, "missing.asc") }, "--keyring"},
		"output":      {func(r *fetch.Request) { r.OutputFile = filepath.Join(w.Dir, "no-such-dir", "x.img") }, "no-such-dir"},
	}
	for name, tc := range bad {
		_, err := fetch.FetchRelease(ctx, req(tc.mod))
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want an invalid-input error naming %q", name, err, tc.want)
		}
	}
	if n := len(w.Srv.Requests("")); n != 0 {
		t.Errorf("the bad values made %d requests, want none", n)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "x.img")); err == nil {
		t.Error("a refused fetch wrote an output")
	}
}

// Describe is `release`: a pinned version checked, the URLs of both compressions, and the
// Kubernetes version resolved only when asked.
func TestDescribeRelease(t *testing.T) {
	w := fetchtest.NewWorld(t)
	d, err := fetch.Describe(context.Background(), fetch.DescribeOptions{Image: "qemu", Network: httpx.Options{Retries: 1},
		Release: release.Release{Server: w.Srv.ReleaseServer(), Channel: "stable", Arch: "amd64", Version: "current"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != fetchtest.CurrentVersion || d.RequestedVersion != "current" || len(d.Artifacts) != 2 || d.KubernetesVersion != "" {
		t.Fatalf("description %+v", d)
	}
	if !strings.HasSuffix(d.Artifacts[0].URL, w.Cur.ImgPath()) || !strings.HasSuffix(d.Artifacts[1].URL, w.Cur.BZ2Path()) {
		t.Errorf("artifacts %s, %s: want the .img and .img.bz2 of %s", d.Artifacts[0].URL, d.Artifacts[1].URL, w.Cur.Dir())
	}
	_, err = fetch.Describe(context.Background(), fetch.DescribeOptions{Image: "qemu",
		Release: release.Release{Server: w.Srv.ReleaseServer(), Channel: "stable", Arch: "amd64", Version: "9999.0.0"}})
	if err == nil || !strings.Contains(err.Error(), "9999.0.0") {
		t.Errorf("a version the server lacks: err %v, want one naming it", err)
	}
}
