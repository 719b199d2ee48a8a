package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

func TestImageNameMatchesBuild(t *testing.T) {
	for _, m := range methods {
		if got, want := ImageName(m, "beta", "4459.1.0", "v1.35.2"), imagebuild.DefaultImageName(m, "beta", "4459.1.0", "v1.35.2"); got != want {
			t.Errorf("%s: fleet names %q, build names %q", m, got, want)
		}
	}
}

func TestImageFromGlance(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name  string
		props map[string]any
		want  Slot
		ok    bool
	}{
		{"flatcar-stable-4459.2.0-kube-v1.35.2-sysext", nil, Slot{"stable", "v1.35", "sysext"}, true},
		{"flatcar-beta-4487.1.0-kube-v1.34.6", nil, Slot{"beta", "v1.34", "packer"}, true},
		{"my-own-name", map[string]any{"flatcar_channel": "lts", "flatcar_capo_method": "packer", "os_version": "4081.3.4", "kubernetes_version": "v1.33.4"}, Slot{"lts", "v1.33", "packer"}, true},
		{"my-own-name", map[string]any{"flatcar_channel": "lts"}, Slot{Channel: "lts"}, false},
		{"flatcar-stable-nonsense", nil, Slot{}, false},
	}
	for _, c := range cases {
		im, ok := imageFromGlance("east", images.Image{ID: "x", Name: c.name, Properties: c.props, CreatedAt: at})
		if ok != c.ok || (ok && im.Slot != c.want) {
			t.Errorf("%s %v: slot %+v ok %v, want %+v %v", c.name, c.props, im.Slot, ok, c.want, c.ok)
		}
	}
}

func TestNewerOrdersByVersionsThenTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := Image{ID: "a", FlatcarVersion: "4459.2.0", KubernetesVersion: "v1.35.2", Created: t0}
	b := Image{ID: "b", FlatcarVersion: "4459.10.0", KubernetesVersion: "v1.35.1", Created: t0.Add(-time.Hour)}
	c := Image{ID: "c", FlatcarVersion: "4459.2.0", KubernetesVersion: "v1.35.10", Created: t0.Add(-time.Hour)}
	d := Image{ID: "d", FlatcarVersion: "4459.2.0", KubernetesVersion: "v1.35.2", Created: t0.Add(time.Minute)}
	rc := Image{ID: "rc", FlatcarVersion: "4459.2.0", KubernetesVersion: "v1.35.2-rc.1", Created: t0.Add(time.Hour)}
	for _, p := range [][2]Image{{b, a}, {c, a}, {d, a}, {a, rc}} {
		if !newer(p[0], p[1]) || newer(p[1], p[0]) {
			t.Errorf("%s should be newer than %s", p[0].ID, p[1].ID)
		}
	}
}

func img(cloud, id, channel, fv, kv, method string, created int64) Image {
	return Image{Cloud: cloud, ID: id, Name: ImageName(method, channel, fv, kv), Slot: Slot{channel, minor(kv), method},
		FlatcarVersion: fv, KubernetesVersion: kv, Status: "active", Created: time.Unix(created, 0)}
}

func TestDecideKeepsNewestPerSlotAndCloud(t *testing.T) {
	imgs := []Image{
		img("east", "e1", "stable", "4459.2.0", "v1.35.2", "sysext", 1),
		img("east", "e2", "stable", "4459.2.1", "v1.35.2", "sysext", 2),
		img("east", "e3", "stable", "4459.2.2", "v1.35.2", "sysext", 3),
		img("east", "e4", "stable", "4459.2.0", "v1.34.6", "sysext", 4), // other minor: its own slot
		img("east", "e5", "beta", "4487.1.0", "v1.35.2", "sysext", 5),   // other channel
		img("west", "w1", "stable", "4459.2.0", "v1.35.2", "sysext", 1),
		img("west", "w2", "stable", "4459.2.1", "v1.35.2", "sysext", 2),
		img("east", "e6", "stable", "4459.2.0", "v1.35.2", "packer", 6), // other method
	}
	saving := img("east", "e7", "stable", "4459.1.0", "v1.35.2", "sysext", 0)
	saving.Status = "saving"
	imgs = append(imgs, saving)
	prot := &protectSet{where: map[string]string{"e2": "cluster.yaml"}}
	ds := decide(imgs, nil, 1, false, prot)
	got := map[string]string{}
	for _, d := range ds {
		got[d.ID] = d.Action
	}
	want := map[string]string{"e1": Delete, "e2": protected, "e3": Keep, "e4": Keep, "e5": Keep, "w1": Delete, "w2": Keep, "e6": Keep, "e7": Keep}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decisions %v\nwant      %v", got, want)
	}
	hidden := decide(imgs, nil, 1, true, nil)
	for _, d := range hidden {
		if d.ID == "e1" && d.Action != Hide {
			t.Errorf("with hide, e1 is %s", d.Action)
		}
		if d.Action == Delete {
			t.Errorf("with hide nothing is deleted, %s is", d.ID)
		}
	}
}

type fakeRemover struct{ calls []string }

func (f *fakeRemover) Delete(_ context.Context, cloud, id string) error {
	f.calls = append(f.calls, "delete "+cloud+" "+id)
	if id == "bad" {
		return errors.New("HTTP 409")
	}
	return nil
}
func (f *fakeRemover) Hide(_ context.Context, cloud, id string) error {
	f.calls = append(f.calls, "hide "+cloud+" "+id)
	return nil
}

func TestApplyGoesOnAfterAFailure(t *testing.T) {
	ds := []Decision{{Image: Image{Cloud: "a", ID: "bad"}, Action: Delete}, {Image: Image{Cloud: "a", ID: "k"}, Action: Keep},
		{Image: Image{Cloud: "b", ID: "h"}, Action: Hide}}
	r := &fakeRemover{}
	err := apply(context.Background(), ds, r)
	if err == nil || !strings.Contains(err.Error(), "HTTP 409") {
		t.Fatalf("err %v", err)
	}
	if !reflect.DeepEqual(r.calls, []string{"delete a bad", "hide b h"}) || ds[0].Done || !ds[2].Done || ds[0].Error == "" {
		t.Errorf("calls %v, decisions %+v", r.calls, ds)
	}
}

func TestLoadProtect(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(manifests, []byte(`apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackMachineTemplate
spec:
  template:
    spec:
      image:
        filter:
          name: flatcar-stable-4459.2.0-kube-v1.35.2-sysext
---
apiVersion: openstack.k-orc.cloud/v1alpha1
kind: Image
spec:
  import:
    id: 0b2d-glance-id
`), 0o644)
	record := filepath.Join(dir, "x.build.json")
	os.WriteFile(record, []byte(`{"imageName": "flatcar-beta-4487.1.0-kube-v1.34.6", "glance": [{"cloud": "east", "id": "rec-id"}]}`), 0o644)
	p, err := loadProtect([]string{manifests, record})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range []Image{{Name: "flatcar-stable-4459.2.0-kube-v1.35.2-sysext"}, {ID: "0b2d-glance-id"}, {Name: "flatcar-beta-4487.1.0-kube-v1.34.6"}, {ID: "rec-id"}} {
		if !p.Has(im) {
			t.Errorf("%+v is not protected", im)
		}
	}
	if p.Has(Image{Name: "flatcar-stable-4459.1.0-kube-v1.35.2-sysext", ID: "other"}) {
		t.Error("an image no file names is protected")
	}
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	if _, err := loadProtect([]string{empty}); err == nil {
		t.Error("an empty protect file is accepted (a truncated manifest would protect nothing)")
	}
}

type fakeResolver map[string]string

func (f fakeResolver) Flatcar(_ context.Context, ch string) (string, error) {
	if v, ok := f[ch]; ok {
		return v, nil
	}
	return "", errors.New("no such channel on the server")
}
func (f fakeResolver) Kubernetes(_ context.Context, spec string) (string, error) {
	if v, ok := f["k8s:"+spec]; ok {
		return v, nil
	}
	return spec, nil
}

type fakeCatalog map[string][]Image

func (f fakeCatalog) Images(_ context.Context, cloud string) ([]Image, error) {
	if cloud == "broken" {
		return nil, errors.New("Glance answered HTTP 500")
	}
	return f[cloud], nil
}

func TestPlanStatesAndMatrix(t *testing.T) {
	res := fakeResolver{"stable": "4459.2.2", "beta": "4487.1.0", "k8s:1.35": "v1.35.2"}
	dir := t.TempDir()
	present := ImageName("sysext", "stable", "4459.2.2", "v1.35.2")
	os.WriteFile(filepath.Join(dir, present+".qcow2.build.json"), []byte(`{"artifacts":[{"file":"`+present+`.qcow2","sha512":"local-hash"}]}`), 0o644)
	ok := img("east", "p", "stable", "4459.2.2", "v1.35.2", "sysext", 1)
	ok.Hash = "local-hash"
	differs := ok
	differs.Cloud, differs.ID, differs.Hash = "west", "d", "other-hash"
	cat := fakeCatalog{
		"east": {ok, img("east", "old", "beta", "4480.0.0", "v1.35.1", "sysext", 1)},
		"west": {differs},
	}
	c := Config{Channels: []string{"stable", "beta"}, KubernetesVersions: []string{"1.35"}, Methods: []string{"sysext"},
		Clouds: []string{"east", "west", "broken"}, OutputDir: dir}
	r := plan(context.Background(), c, res, cat)
	if len(r.Rows) != 2 {
		t.Fatalf("rows %+v", r.Rows)
	}
	states := func(row Row) string {
		var s []string
		for _, c := range row.Clouds {
			s = append(s, c.Cloud+"="+c.Status)
		}
		return strings.Join(s, " ")
	}
	if got := states(r.Rows[0]); got != "east=present west=differs broken=error" {
		t.Errorf("stable row: %s", got)
	}
	if got := states(r.Rows[1]); got != "east=stale west=missing broken=error" {
		t.Errorf("beta row: %s", got)
	}
	if r.Rows[1].Clouds[0].Newest != ImageName("sysext", "beta", "4480.0.0", "v1.35.1") {
		t.Errorf("stale cell names %q", r.Rows[1].Clouds[0].Newest)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "cloud broken: Glance answered HTTP 500") {
		t.Errorf("plan error %v", err)
	}
	m := r.Matrix()
	if len(m.Include) != 2 || !reflect.DeepEqual(m.Include[0].Clouds, []string{"west", "broken"}) ||
		m.Include[1].FlatcarVersion != "4487.1.0" || m.Include[1].KubernetesVersion != "v1.35.2" {
		t.Errorf("matrix %+v", m)
	}
	gl := r.GitLabPipeline("img")
	entries := gl["build"].(map[string]any)["parallel"].(map[string]any)["matrix"].([]map[string]string)
	if len(entries) != 2 || entries[0]["FLATCAR_CAPO_CLOUD"] != "west,broken" || entries[1]["FLATCAR_CAPO_VERSION"] != "4487.1.0" {
		t.Errorf("gitlab matrix %v", entries)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{KubernetesVersions: []string{"v1.35.2"}, Channels: []string{"stabel"}},
		{KubernetesVersions: []string{"v1.35.2"}, Methods: []string{"docker"}},
		{},
	} {
		if err := c.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	c := Config{KubernetesVersions: []string{"v1.34.6,v1.35.2"}, Channels: []string{"stable,beta", "beta"}}
	if err := c.Validate(); err != nil || len(c.Channels) != 2 || len(c.KubernetesVersions) != 2 || c.Methods[0] != "sysext" {
		t.Errorf("%v %+v", err, c)
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(path, []byte("channels: [stable]\nkubernetesVersion: [v1.35.2]\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "kubernetesVersion") {
		t.Errorf("a misspelt key: %v", err)
	}
}

func TestValidateCloudsWantsOne(t *testing.T) {
	c := Config{KubernetesVersions: []string{"v1.35.2"}}
	if err := c.ValidateClouds(); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "no cloud: give --cloud") {
		t.Errorf("no cloud: %v", err)
	}
	c = Config{KubernetesVersions: []string{"v1.35.2"}, Clouds: []string{"east"}}
	if err := c.ValidateClouds(); err != nil {
		t.Errorf("one cloud: %v", err)
	}
}

func TestPruneOptionsValidate(t *testing.T) {
	east := Config{Clouds: []string{"east"}}
	for _, o := range []pruneOptions{
		{Config: east, Yes: true, Hide: true}, // two ways to prune
		{},                                    // no cloud
		{Config: Config{Clouds: []string{"east"}, Keep: -1}},
		{Config: Config{Clouds: []string{"east"}, Channels: []string{"stabel"}}},
	} {
		if err := o.Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	o := pruneOptions{Config: east, Hide: true}
	err := o.Validate()
	if err != nil || !reflect.DeepEqual(o.Channels, release.Channels) || !reflect.DeepEqual(o.Methods, methods) || o.Keep != 1 || o.Versions != nil || o.DryRun() {
		t.Errorf("defaults (every channel and method, keep 1, no version filter): %v %+v", err, o)
	}
	o = pruneOptions{Config: Config{Clouds: []string{"east"}, KubernetesVersions: []string{"v1.34.6,v1.35.2"}, Keep: 2}}
	if err := o.Validate(); err != nil || !reflect.DeepEqual(o.Versions, []string{"v1.34.6", "v1.35.2"}) || o.Keep != 2 || !o.DryRun() {
		t.Errorf("named versions are split for the minor filter: %v %+v", err, o)
	}
}
