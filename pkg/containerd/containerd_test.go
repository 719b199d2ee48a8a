package containerd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/containerdtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
)

func TestDefaultRunc(t *testing.T) {
	for v, want := range map[string]string{"2.1.5": "v1.3.3", "v2.3.7": "v1.5.2", "2.3.9": "v1.5.2", "2.2.1": "v1.3.6", "2.4.2": "v1.5.2", "3.0.0": "", "2.9.1": ""} {
		if got := containerd.DefaultRuncFor(v); got != want {
			t.Errorf("DefaultRuncFor(%s) = %q, want %q", v, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		o    containerd.Options
		want string
	}{
		{containerd.Options{Version: "latest"}, "invalid --containerd-version"},
		{containerd.Options{Version: "2.3"}, "invalid --containerd-version"},
		{containerd.Options{Version: "3.0.0"}, "give --runc-version"},
		{containerd.Options{Version: "2.3.7", Runc: "1.5"}, "invalid --runc-version"},
		{containerd.Options{Version: "2.3.7", Arch: "s390x"}, "amd64 or arm64"},
		{containerd.Options{Version: "2.3.7", GitHubMirror: "ftp://x"}, "--github-mirror"},
	} {
		err := c.o.Validate()
		if err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an invalid-input error with %q", c.o, err, c.want)
		}
	}
	o := containerd.Options{Version: "v2.3.7", Runc: "1.4.3"}
	if err := o.Validate(); err != nil || o.Version != "2.3.7" || o.Runc != "v1.4.3" || o.GitHubMirror != containerd.DefaultGitHubMirror {
		t.Errorf("normalised: %+v %v", o, err)
	}
	if got := o.TarballURL(); got != "https://github.com/containerd/containerd/releases/download/v2.3.7/containerd-2.3.7-linux-amd64.tar.gz" {
		t.Errorf("tarball URL %s", got)
	}
	if got := o.RuncURL(); got != "https://github.com/opencontainers/runc/releases/download/v1.4.3/runc.amd64" {
		t.Errorf("runc URL %s", got)
	}
}

// Download checks both files against the published sums (runc's lists every asset), keeps them
// in the cache, and refuses a tampered tarball naming the checksum file.
func TestDownload(t *testing.T) {
	bins := t.TempDir()
	for _, b := range append(containerdtest.Binaries, "runc") {
		os.WriteFile(filepath.Join(bins, b), []byte("#!/bin/sh\necho "+b+"\n"), 0o755)
	}
	srv := fetchtest.NewServer(t)
	rel := containerdtest.Publish(t, srv, containerd.Options{Version: "2.3.7"}, bins, filepath.Join(bins, "runc"))
	o := rel.Options
	o.CacheDir = t.TempDir()
	c := httpx.New(httpx.Options{Retries: 1})
	set, err := containerd.Download(context.Background(), c, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set.Tarball.SHA256 != rel.TarballSHA256 || set.Runc.SHA256 != rel.RuncSHA256 || set.Tarball.Cached {
		t.Errorf("downloads: %+v", set)
	}
	if b, _ := os.ReadFile(set.Runc.Path); string(b) != string(rel.Runc) {
		t.Error("runc in the cache is not the served one")
	}
	again, err := containerd.Download(context.Background(), c, o, nil)
	if err != nil || !again.Tarball.Cached || !again.Runc.Cached {
		t.Errorf("second download not from the cache: %+v %v", again, err)
	}
	srv.Put(rel.TarballPath, append([]byte("x"), rel.Tarball...))
	o.CacheDir = t.TempDir()
	_, err = containerd.Download(context.Background(), c, o, nil)
	var ce *containerd.ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), ".sha256sum") {
		t.Errorf("tampered tarball: %v", err)
	}
	srv.Remove(rel.TarballPath)
	_, err = containerd.Download(context.Background(), c, o, nil)
	if err == nil || !strings.Contains(err.Error(), "--github-mirror") {
		t.Errorf("missing tarball: %v", err)
	}
}
