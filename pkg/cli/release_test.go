package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

func TestReleaseResolvesCurrentAndPinned(t *testing.T) {
	w := fetchtest.NewWorld(t)
	r := w.Run(t, "release").MustSucceed(t)
	if !strings.Contains(r.Stdout, "Flatcar stable "+fetchtest.CurrentVersion) ||
		!strings.Contains(r.Stdout, w.Srv.URL+"/stable/amd64-usr/"+fetchtest.CurrentVersion+"/"+fetchtest.ImgName+".bz2.DIGESTS.asc") {
		t.Fatalf("release text:\n%s", r.Stdout)
	}
	r = w.Run(t, "release", "--version", fetchtest.OldVersion, "-o", "json").MustSucceed(t)
	var rep struct {
		Version, RequestedVersion string
		Artifacts                 []struct{ File, URL string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != fetchtest.OldVersion || len(rep.Artifacts) != 2 ||
		rep.Artifacts[0].URL != w.Srv.URL+"/stable/amd64-usr/"+fetchtest.OldVersion+"/"+fetchtest.ImgName {
		t.Fatalf("release json: %+v", rep)
	}
	// image-builder's variable names work as defaults.
	r = testutil.RunCmd(t, testutil.Cmd{Args: w.Args("release"),
		Env: []string{"FLATCAR_CHANNEL=stable", "FLATCAR_VERSION=" + fetchtest.OldVersion}}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "Flatcar stable "+fetchtest.OldVersion) {
		t.Fatalf("FLATCAR_VERSION ignored:\n%s", r.Stdout)
	}
}

func TestReleaseLTSStreams(t *testing.T) {
	w := fetchtest.NewWorld(t)
	lts := w.Cur
	lts.Channel, lts.Version, lts.Current = "lts", "4081.3.6", true
	w.Srv.Publish(t, lts)
	w.Srv.Put("/lts/amd64-usr/current-2024/version.txt", w.Srv.Get("/lts/amd64-usr/4081.3.6/version.txt"))
	for _, v := range []string{"current", "current-2024", "4081.3.6"} {
		r := w.Run(t, "release", "--channel", "lts", "--version", v).MustSucceed(t)
		if !strings.Contains(r.Stdout, "Flatcar lts 4081.3.6") || !strings.Contains(r.Stdout, "/lts/amd64-usr/4081.3.6/") {
			t.Fatalf("lts %s:\n%s", v, r.Stdout)
		}
	}
	w.Run(t, "release", "--channel", "stable", "--version", "current-2024").MustFail(t, 2, "only on the lts channel")
}

// release --kubernetes-version resolves stable and minors through the Kubernetes mirror's marker
// files as build does, and lists the downloads a build would make.
func TestReleaseResolvesKubernetesVersion(t *testing.T) {
	w := fetchtest.NewWorld(t)
	m := kubetest.New(t, kubernetes.Options{})
	m.SetMarker("stable-1.35.txt", []byte("v1.35.2\n"))
	r := w.Run(t, "release", "--kubernetes-version", "1.35", "--kubernetes-mirror", m.KubernetesMirror(), "-o", "json").MustSucceed(t)
	var rep struct {
		Version, KubernetesVersion, KubernetesRequested string
		KubernetesDownloads                             []struct{ Name, URL string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != fetchtest.CurrentVersion || rep.KubernetesVersion != "v1.35.2" || rep.KubernetesRequested != "1.35" || len(rep.KubernetesDownloads) != 5 ||
		!strings.Contains(rep.KubernetesDownloads[3].URL, "/v1.35.0/crictl-v1.35.0-linux-amd64.tar.gz") {
		t.Fatalf("release json: %+v", rep)
	}
	r = w.Run(t, "release", "--kubernetes-version", "stable", "--kubernetes-mirror", m.KubernetesMirror()).MustSucceed(t)
	if !strings.Contains(r.Stdout, "Kubernetes "+kubetest.Version+" (stable resolved to "+kubetest.Version+")") {
		t.Fatalf("release text:\n%s", r.Stdout)
	}
	w.Run(t, "release", "--kubernetes-version", "1.99", "--kubernetes-mirror", m.KubernetesMirror()).MustFail(t, 1, m.KubernetesMirror()+"/stable-1.99.txt")
	w.Run(t, "release", "--kubernetes-version", "latest").MustFail(t, 2, "invalid --kubernetes-version")
}
