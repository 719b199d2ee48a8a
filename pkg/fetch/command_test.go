package fetch_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes/kubetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

func TestReleaseResolvesCurrentAndPinned(t *testing.T) {
	w := newWorld(t)
	r := w.run(t, "release").MustSucceed(t)
	if !strings.Contains(r.Stdout, "Flatcar stable "+currentVersion) ||
		!strings.Contains(r.Stdout, w.srv.URL+"/stable/amd64-usr/"+currentVersion+"/"+imgName+".bz2.DIGESTS.asc") {
		t.Fatalf("release text:\n%s", r.Stdout)
	}
	r = w.run(t, "release", "--version", oldVersion, "-o", "json").MustSucceed(t)
	var rep struct {
		Version, RequestedVersion string
		Artifacts                 []struct{ File, URL string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != oldVersion || len(rep.Artifacts) != 2 ||
		rep.Artifacts[0].URL != w.srv.URL+"/stable/amd64-usr/"+oldVersion+"/"+imgName {
		t.Fatalf("release json: %+v", rep)
	}
	// image-builder's variable names work as defaults.
	r = testutil.RunCmd(t, testutil.Cmd{Args: w.args("release"),
		Env: []string{"FLATCAR_CHANNEL=stable", "FLATCAR_VERSION=" + oldVersion}}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "Flatcar stable "+oldVersion) {
		t.Fatalf("FLATCAR_VERSION ignored:\n%s", r.Stdout)
	}
}

func TestReleaseLTSStreams(t *testing.T) {
	w := newWorld(t)
	lts := w.cur
	lts.Channel, lts.Version, lts.Current = "lts", "4081.3.6", true
	w.srv.Publish(t, lts)
	w.srv.Put("/lts/amd64-usr/current-2024/version.txt", w.srv.Get("/lts/amd64-usr/4081.3.6/version.txt"))
	for _, v := range []string{"current", "current-2024", "4081.3.6"} {
		r := w.run(t, "release", "--channel", "lts", "--version", v).MustSucceed(t)
		if !strings.Contains(r.Stdout, "Flatcar lts 4081.3.6") || !strings.Contains(r.Stdout, "/lts/amd64-usr/4081.3.6/") {
			t.Fatalf("lts %s:\n%s", v, r.Stdout)
		}
	}
	w.run(t, "release", "--channel", "stable", "--version", "current-2024").MustFail(t, 2, "only on the lts channel")
}

func TestFetchImgThenCache(t *testing.T) {
	w := newWorld(t)
	r := w.run(t, "fetch", "-o", "json").MustSucceed(t)
	out := filepath.Join(w.dir, "flatcar-stable-"+currentVersion+"-qemu.img")
	mustHave(t, out, w.cur.Content)
	var res struct {
		File, Version, Compression string
		Cached, Verified           bool
	}
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Version != currentVersion || res.Compression != "none" || res.Cached || !res.Verified {
		t.Fatalf("first fetch: %+v", res)
	}
	if n := len(w.srv.Requests(imgName + ".bz2")); n != 0 {
		t.Fatalf("the .img exists, yet the .bz2 was requested %d times", n)
	}

	// Second fetch of the same version: no image request, same bytes, reported as cached.
	w.srv.ResetRequests()
	os.Remove(out)
	r = w.run(t, "fetch", "--output-file", "again.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "again.img"), w.cur.Content)
	if reqs := w.srv.Requests(".img"); len(reqs) != 0 {
		t.Fatalf("second fetch requested the image: %+v", reqs)
	}
	if reqs := w.srv.Requests(".asc"); len(reqs) != 0 {
		t.Fatalf("second fetch requested the signed digests: %+v", reqs)
	}
	if !strings.Contains(r.Stdout, "from cache") || !strings.Contains(r.Stdout, currentVersion) {
		t.Fatalf("cached fetch report: %s", r.Stdout)
	}
}

func TestFetchBz2FallbackAndForced(t *testing.T) {
	w := newWorld(t)
	// An old release has no .img: the server answers 404 and the .bz2 is used.
	w.run(t, "fetch", "--version", oldVersion, "--output-file", "old.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "old.img"), w.old.Content)
	if len(w.srv.Requests(oldVersion+"/"+imgName+".bz2")) != 1 {
		t.Fatal("the .bz2 was not downloaded exactly once")
	}
	// --compression bz2 picks the .bz2 even when the .img exists.
	r := w.run(t, "fetch", "--compression", "bz2", "--output-file", "cur.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "cur.img"), w.cur.Content)
	if !strings.Contains(r.Stdout, "decompressed from .bz2") {
		t.Fatalf("report: %s", r.Stdout)
	}
	if len(w.srv.Requests(currentVersion+"/"+imgName)) != 0 {
		t.Fatal("--compression bz2 still requested the .img")
	}
	// The cached .bz2 is decoded again without a download.
	w.srv.ResetRequests()
	w.run(t, "fetch", "--version", oldVersion, "--output-file", "old2.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "old2.img"), w.old.Content)
	if reqs := w.srv.Requests(".bz2"); len(reqs) != 0 {
		t.Fatalf("cached .bz2 downloaded again: %+v", reqs)
	}
}

func TestFetchResumesAfterDrop(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		args       []string
		content    func(w *world) []byte
	}{
		{"img", currentVersion + "/" + imgName, nil, func(w *world) []byte { return w.cur.Content }},
		{"bz2", currentVersion + "/" + imgName + ".bz2", []string{"--compression", "bz2"}, func(w *world) []byte { return w.cur.Content }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			path := "/stable/amd64-usr/" + tc.path
			half := int64(len(w.srv.Get(path)) / 2)
			w.srv.DropAt(path, half, -1)
			w.run(t, "fetch", append(tc.args, "--retries", "0")...).
				MustFail(t, 1, "failed at byte", "run the same command again to resume")
			mustBeEmpty(t, w.dir)
			if len(cachedFiles(t, w.cache)) != 0 {
				t.Fatal("an unverified download entered the cache")
			}
			w.srv.DropAt(path, 0, 0)
			w.srv.ResetRequests()
			w.run(t, "fetch", append(tc.args, "--output-file", "out.img")...).MustSucceed(t)
			mustHave(t, filepath.Join(w.dir, "out.img"), tc.content(w))
			reqs := w.srv.Requests(tc.path)
			if len(reqs) != 1 || reqs[0].Range != "bytes="+itoa(half)+"-" {
				t.Fatalf("resume requests %+v, want one with Range bytes=%d-", reqs, half)
			}
		})
	}
}

// A connection cut once mid-body is resumed within the same run.
func TestFetchReconnectsWithinOneRun(t *testing.T) {
	w := newWorld(t)
	path := "/stable/amd64-usr/" + currentVersion + "/" + imgName
	w.srv.DropAt(path, int64(len(w.cur.Content)/3), 1)
	w.run(t, "fetch", "--output-file", "out.img").MustSucceed(t)
	mustHave(t, filepath.Join(w.dir, "out.img"), w.cur.Content)
	reqs := w.srv.Requests(imgName)
	if len(reqs) != 2 || reqs[1].Range != "bytes="+itoa(int64(len(w.cur.Content)/3))+"-" {
		t.Fatalf("requests %+v, want a full one then a Range from the cut", reqs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// release --kubernetes-version resolves stable and minors through the Kubernetes mirror's marker
// files as build does, and lists the downloads a build would make.
func TestReleaseResolvesKubernetesVersion(t *testing.T) {
	w := newWorld(t)
	m := kubetest.New(t, kubernetes.Options{})
	m.SetMarker("stable-1.35.txt", []byte("v1.35.2\n"))
	r := w.run(t, "release", "--kubernetes-version", "1.35", "--kubernetes-mirror", m.KubernetesMirror(), "-o", "json").MustSucceed(t)
	var rep struct {
		Version, KubernetesVersion, KubernetesRequested string
		KubernetesDownloads                             []struct{ Name, URL string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != currentVersion || rep.KubernetesVersion != "v1.35.2" || rep.KubernetesRequested != "1.35" || len(rep.KubernetesDownloads) != 5 ||
		!strings.Contains(rep.KubernetesDownloads[3].URL, "/v1.35.0/crictl-v1.35.0-linux-amd64.tar.gz") {
		t.Fatalf("release json: %+v", rep)
	}
	r = w.run(t, "release", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).MustSucceed(t)
	if !strings.Contains(r.Stdout, "Kubernetes "+kubetest.Version+" (stable resolved to "+kubetest.Version+")") {
		t.Fatalf("release text:\n%s", r.Stdout)
	}
	w.run(t, "release", "--kubernetes-version", "1.99", "--kubernetes-mirror", m.KubernetesMirror()).MustFail(t, 1, m.KubernetesMirror()+"/stable-1.99.txt")
	w.run(t, "release", "--kubernetes-version", "latest").MustFail(t, 2, "invalid --kubernetes-version")
}
