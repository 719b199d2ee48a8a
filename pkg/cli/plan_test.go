package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/fleet"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// fleetWorld is what the fleet commands talk to: the real Keystone + Glance (two regions: local and
// local-two), a stand-in release server and Kubernetes mirror, and a cloud "broken" whose Glance
// answers 500 to every image list.
type fleetWorld struct {
	clouds  string // clouds.yaml
	release *fetchtest.Server
	kube    *kubetest.Mirror
}

func newFleetWorld(t *testing.T) *fleetWorld {
	stack := testutil.StartOpenStack(t, filepath.Join(t.TempDir(), "openstack"))
	w := &fleetWorld{}
	broken := brokenCloud(t)
	w.clouds = stack().CloudsYAML
	f, err := os.OpenFile(w.clouds, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "  broken:\n    auth:\n      auth_url: %s/v3\n      username: u\n      password: p\n      project_name: p\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n", broken)
	f.Close()
	t.Setenv("OS_CLIENT_CONFIG_FILE", w.clouds)
	w.release = fetchtest.NewServer(t)
	w.setCurrent("stable", "4459.2.2")
	w.setCurrent("beta", "4487.1.0")
	w.kube = kubetest.New(t, kubernetes.Options{Kubernetes: "v1.33.4"})
	w.kube.AddVersion("v1.34.6")
	w.kube.SetMarker("stable-1.34.txt", []byte("v1.34.6\n"))
	return w
}

func (w *fleetWorld) setCurrent(channel, version string) {
	w.release.Put("/"+channel+"/amd64-usr/current/version.txt", []byte("FLATCAR_BUILD=1\nFLATCAR_VERSION="+version+"\nFLATCAR_VERSION_ID="+version+"\n"))
}

func (w *fleetWorld) run(t *testing.T, args ...string) testutil.Result {
	t.Helper()
	return testutil.RunCmd(t, testutil.Cmd{Args: args, Env: []string{"OS_CLIENT_CONFIG_FILE=" + w.clouds}})
}

func (w *fleetWorld) planArgs(extra ...string) []string {
	return append([]string{"plan", "--release-server", w.release.ReleaseServer(), "--kubernetes-mirror", w.kube.KubernetesMirror()}, extra...)
}

// brokenCloud is a Keystone that authenticates anyone and names a Glance that fails every list.
func brokenCloud(t *testing.T) string {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v3/auth/tokens":
			rw.Header().Set("X-Subject-Token", "tok")
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusCreated)
			fmt.Fprintf(rw, `{"token": {"expires_at": %q, "catalog": [{"type": "image", "name": "glance", "endpoints": [
				{"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "%s/image"}]}]}}`,
				time.Now().Add(time.Hour).UTC().Format(time.RFC3339), srv.URL)
		default:
			http.Error(rw, `{"message": "database is locked"}`, http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// putImage makes an active image in a cloud as upload would (tags, properties), in-process for
// speed; tool false makes a foreign image without the tool's tag.
func putImage(t *testing.T, cloud, name, channel, fv, kv, method string, tool bool) string {
	t.Helper()
	ctx := context.Background()
	c, err := glance.Connect(ctx, cloud)
	if err != nil {
		t.Fatal(err)
	}
	opts := images.CreateOpts{Name: name, ContainerFormat: "bare", DiskFormat: "raw"}
	if tool {
		opts.Tags = []string{glance.ToolTag, "kube-" + kv}
		opts.Properties = map[string]string{glance.PropertyChannel: channel, glance.PropertyMethod: method, "os_version": fv, "kubernetes_version": kv}
	}
	img, err := images.Create(ctx, c.Image, opts).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if err := imagedata.Upload(ctx, c.Image, img.ID, bytes.NewReader([]byte(name))).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		got, err := images.Get(ctx, c.Image, img.ID).Extract()
		if err == nil && got.Status == images.ImageStatusActive {
			return img.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s never became active", img.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// listed is every image of the cloud by name (hidden ones included), with its os_hidden flag.
func listed(t *testing.T, cloud string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	c, err := glance.Connect(ctx, cloud)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, hidden := range []bool{false, true} {
		pages, err := images.List(c.Image, images.ListOpts{Hidden: hidden}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		imgs, _ := images.ExtractImages(pages)
		for _, img := range imgs {
			out[img.Name] = img.Hidden
		}
	}
	return out
}

// TestPlanAndPrune drives plan and prune as CI jobs would, against the real Glance.
func TestPlanAndPrune(t *testing.T) {
	w := newFleetWorld(t)
	t.Run("plan", func(t *testing.T) { testPlan(t, w) })
	t.Run("prune", func(t *testing.T) { testPrune(t, w) })
}

func testPlan(t *testing.T, w *fleetWorld) {
	// local: stable's v1.33 image is current; stable's v1.34 image is of an older Flatcar
	// (stale). local-two has nothing. broken answers 500.
	putImage(t, "local", fleet.ImageName("sysext", "stable", "4459.2.2", "v1.33.4"), "stable", "4459.2.2", "v1.33.4", "sysext", true)
	putImage(t, "local", fleet.ImageName("sysext", "stable", "4459.2.1", "v1.34.6"), "stable", "4459.2.1", "v1.34.6", "sysext", true)
	putImage(t, "local", "flatcar-stable-4459.2.2-kube-v1.34.6-sysext-foreign", "", "", "", "", false)

	args := w.planArgs("--channel", "stable,beta", "--kubernetes-version", "1.33", "--kubernetes-version", "v1.34.6",
		"--method", "sysext", "--cloud", "local,local-two")
	r := w.run(t, append(args, "-o", "json")...).MustSucceed(t)
	var rep struct {
		Rows   []fleet.Row        `json:"rows"`
		Matrix fleet.GitHubMatrix `json:"matrix"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, r.Stdout)
	}
	entry := func(channel, fv, kv string, clouds ...string) fleet.MatrixEntry {
		return fleet.MatrixEntry{Channel: channel, FlatcarVersion: fv, KubernetesVersion: kv, Method: "sysext",
			ImageName: fleet.ImageName("sysext", channel, fv, kv), Clouds: clouds}
	}
	want := []fleet.MatrixEntry{
		entry("stable", "4459.2.2", "v1.33.4", "local-two"),
		entry("stable", "4459.2.2", "v1.34.6", "local", "local-two"),
		entry("beta", "4487.1.0", "v1.33.4", "local", "local-two"),
		entry("beta", "4487.1.0", "v1.34.6", "local", "local-two"),
	}
	if !reflect.DeepEqual(rep.Matrix.Include, want) {
		t.Errorf("matrix\n%+v\nwant\n%+v", rep.Matrix.Include, want)
	}
	if st := rep.Rows[1].Clouds[0]; st.Status != fleet.Stale || st.Newest != fleet.ImageName("sysext", "stable", "4459.2.1", "v1.34.6") {
		t.Errorf("stable v1.34 in local: %+v, want stale naming the older image", st)
	}
	// --format github is the matrix alone, as strategy.matrix reads it.
	gh := w.run(t, append(args, "--format", "github")...).MustSucceed(t)
	var m fleet.GitHubMatrix
	if err := json.Unmarshal([]byte(gh.Stdout), &m); err != nil || !reflect.DeepEqual(m.Include, want) {
		t.Errorf("--format github: %v\n%s", err, gh.Stdout)
	}
	// --format gitlab needs the image its jobs run in (there is no public one to default to): the
	// flag, or in a GitLab job the job's own image.
	gl := w.run(t, append(args, "--format", "gitlab", "--gitlab-image", "registry.example.com/flatcar-capo:v1-shell")...).MustSucceed(t)
	if !strings.Contains(gl.Stdout, `"FLATCAR_CAPO_CLOUD": "local,local-two"`) || !strings.Contains(gl.Stdout, `"matrix"`) ||
		!strings.Contains(gl.Stdout, `"image": "registry.example.com/flatcar-capo:v1-shell"`) {
		t.Errorf("--format gitlab:\n%s", gl.Stdout)
	}
	inJob := testutil.RunCmd(t, testutil.Cmd{Args: append(args, "--format", "gitlab"),
		Env: []string{"OS_CLIENT_CONFIG_FILE=" + w.clouds, "CI_JOB_IMAGE=registry.example.com/flatcar-capo:v2-shell"}}).MustSucceed(t)
	if !strings.Contains(inJob.Stdout, `"image": "registry.example.com/flatcar-capo:v2-shell"`) {
		t.Errorf("--format gitlab in a GitLab job does not run the child jobs in $CI_JOB_IMAGE:\n%s", inJob.Stdout)
	}
	w.run(t, append(args, "--format", "gitlab")...).MustFail(t, 2, "--gitlab-image", "flatcar-capo:shell")
	w.run(t, append(args, "--format", "gitlab", "--gitlab-image", "a b")...).MustFail(t, 2, "--gitlab-image", "not an image reference")

	// A cloud whose Glance fails: its cells are errors naming it, the others' rows still print, exit 1.
	bad := w.run(t, w.planArgs("--channel", "stable", "--kubernetes-version", "1.33", "--cloud", "local,broken")...)
	bad.MustFail(t, 1, "cloud broken", "500")
	if !strings.Contains(bad.Stdout, "present") || !strings.Contains(bad.Stdout, "error") {
		t.Errorf("the rows are not printed beside the error:\n%s", bad.Stdout)
	}
	// Bad input: exit 2 naming the problem.
	w.run(t, w.planArgs("--channel", "stabel", "--kubernetes-version", "1.33", "--cloud", "local")...).MustFail(t, 2, "stabel")
	w.run(t, w.planArgs("--kubernetes-version", "1.33", "--cloud", "nosuchcloud")...).MustFail(t, 1, "nosuchcloud")
	cfg := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(cfg, []byte("channels: [stable]\nkubernetesVersion: [\"1.33\"]\nclouds: [local]\n"), 0o644)
	w.run(t, w.planArgs("--config", cfg)...).MustFail(t, 2, "kubernetesVersion")

	// plan --build runs the one missing build (local-two's v1.33 image) from a config file;
	// then nothing is left to do.
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	out := filepath.Join(t.TempDir(), "out")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`channels: [stable]
kubernetesVersions: ["1.33"]
methods: [sysext]
clouds: [local, local-two]
outputDir: %s
buildArgs: ["--base-image=%s", "--github-mirror=%s", "--cache-dir=%s", "--no-preload-images"]
`, out, base, w.kube.GitHubMirror(), filepath.Join(t.TempDir(), "cache"))), 0o644)
	built := w.run(t, w.planArgs("--config", cfg, "--build")...).MustSucceed(t)
	if !strings.Contains(built.Stdout, "built "+fleet.ImageName("sysext", "stable", "4459.2.2", "v1.33.4")+" for local-two: exit 0") {
		t.Errorf("plan --build:\n%s\n%s", built.Stdout, built.Stderr)
	}
	again := w.run(t, w.planArgs("--config", cfg, "--cloud", "local-two")...).MustSucceed(t)
	if !strings.Contains(again.Stdout, "nothing to do") {
		t.Errorf("after plan --build, plan still has work:\n%s", again.Stdout)
	}
	// local's image of that name was not made by this build: with the build record at hand,
	// plan says its content differs (by os_hash_value against the record's sha512).
	both := w.run(t, w.planArgs("--config", cfg, "-o", "json")...).MustSucceed(t)
	var rows struct{ Rows []fleet.Row }
	json.Unmarshal([]byte(both.Stdout), &rows)
	if len(rows.Rows) != 1 || rows.Rows[0].Clouds[0].Status != fleet.Differs || rows.Rows[0].Clouds[1].Status != fleet.Present {
		t.Errorf("local/local-two after the build: %+v", rows.Rows)
	}
}

func testPrune(t *testing.T, w *fleetWorld) {
	cloud := "local-two"
	type im struct{ channel, fv, kv string }
	var made []string
	for _, i := range []im{
		{"stable", "4459.1.0", "v1.33.4"}, {"stable", "4459.2.0", "v1.33.4"}, {"stable", "4459.2.1", "v1.33.4"},
		{"stable", "4459.1.0", "v1.34.6"}, {"stable", "4459.2.0", "v1.34.6"}, {"stable", "4459.2.1", "v1.34.6"},
		{"beta", "4487.0.0", "v1.33.4"}, {"beta", "4487.1.0", "v1.33.4"}, {"beta", "4480.0.0", "v1.33.4"},
		{"beta", "4487.0.0", "v1.34.6"}, {"beta", "4487.1.0", "v1.34.6"}, {"beta", "4480.0.0", "v1.34.6"},
	} {
		n := fleet.ImageName("packer", i.channel, i.fv, i.kv)
		putImage(t, cloud, n, i.channel, i.fv, i.kv, "packer", true)
		made = append(made, n)
	}
	foreign := "flatcar-stable-4000.0.0-kube-v1.33.4"
	putImage(t, cloud, foreign, "", "", "", "", false)
	protected := fleet.ImageName("packer", "beta", "4480.0.0", "v1.34.6")
	record := filepath.Join(t.TempDir(), "in-use.build.json")
	os.WriteFile(record, []byte(`{"imageName": "`+protected+`"}`), 0o644)
	before := listed(t, cloud)

	// Without --yes nothing changes, and the report says what would go.
	dry := w.run(t, "prune", "--cloud", cloud, "--method", "packer", "--keep", "2", "--protect", record, "-o", "json").MustSucceed(t)
	if !reflect.DeepEqual(listed(t, cloud), before) {
		t.Fatal("prune without --yes changed Glance")
	}
	var rep struct {
		DryRun bool             `json:"dryRun"`
		Images []fleet.Decision `json:"images"`
	}
	if err := json.Unmarshal([]byte(dry.Stdout), &rep); err != nil || !rep.DryRun {
		t.Fatalf("prune -o json: %v\n%s", err, dry.Stdout)
	}
	var doomed []string
	for _, d := range rep.Images {
		if d.Action == fleet.Delete {
			doomed = append(doomed, d.Name)
		}
	}
	sort.Strings(doomed)
	// Per slot (channel x minor), keep the two newest Flatcar versions; beta v1.34's oldest is protected.
	want := []string{fleet.ImageName("packer", "beta", "4480.0.0", "v1.33.4"), fleet.ImageName("packer", "stable", "4459.1.0", "v1.33.4"), fleet.ImageName("packer", "stable", "4459.1.0", "v1.34.6")}
	sort.Strings(want)
	if !reflect.DeepEqual(doomed, want) {
		t.Errorf("would delete %v\nwant %v", doomed, want)
	}
	w.run(t, "prune", "--cloud", cloud, "--yes", "--hide").MustFail(t, 2, "choose one")

	// --hide: the stable v1.33 slot keeps one, the older two are hidden (still there).
	w.run(t, "prune", "--cloud", cloud, "--channel", "stable", "--kubernetes-version", "v1.33.4", "--keep", "1", "--hide").MustSucceed(t)
	after := listed(t, cloud)
	for _, fv := range []string{"4459.1.0", "4459.2.0"} {
		if hidden, ok := after[fleet.ImageName("packer", "stable", fv, "v1.33.4")]; !ok || !hidden {
			t.Errorf("stable %s v1.33 hidden=%v present=%v, want hidden", fv, hidden, ok)
		}
	}
	// --yes: delete beyond two per slot; the foreign and the protected image stay.
	w.run(t, "prune", "--cloud", cloud, "--keep", "2", "--protect", record, "--yes").MustSucceed(t)
	after = listed(t, cloud)
	for _, n := range made {
		_, present := after[n]
		gone := false
		for _, d := range want {
			gone = gone || d == n
		}
		if present == gone {
			t.Errorf("%s: present %v after prune --yes", n, present)
		}
	}
	if _, ok := after[foreign]; !ok {
		t.Error("prune deleted an image flatcar-capo did not upload")
	}
}
