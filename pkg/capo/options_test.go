package capo

import (
	"errors"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

func TestParseSets(t *testing.T) {
	for _, s := range []string{"WORKER_MACHINE_COUNT", "=3"} {
		if _, err := parseSets([]string{s}); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "is not VAR=value") {
			t.Errorf("--set %q: %v", s, err)
		}
	}
	v, err := parseSets([]string{"A=1", "B=x=y", "A=2", "C="})
	if err != nil || v["A"] != "2" || v["B"] != "x=y" || v["C"] != "" || len(v) != 3 {
		t.Errorf("%v %v", v, err)
	}
}

func TestSysextURLRules(t *testing.T) {
	for _, c := range []struct{ flavor, url, want string }{
		{FlavorBaked, "http://10.0.0.5/ext", "--sysext-url is for --flavor sysext"},
		{FlavorSysextBaked, "http://10.0.0.5/ext", "--sysext-url is for --flavor sysext"},
		{FlavorSysext, "10.0.0.5/ext", "want the http(s) URL"},
	} {
		if _, err := sysextURL(c.flavor, c.url); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v", c.flavor, c.url, err)
		}
	}
	if v, err := sysextURL(FlavorSysext, "https://10.0.0.5/ext//"); err != nil || v != "https://10.0.0.5/ext" {
		t.Errorf("%q %v", v, err)
	}
}

func TestSysextHashOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    sysextHashOptions
		want string
	}{
		{sysextHashOptions{Flavor: FlavorSysext, SysupdateURL: "10.0.0.5/bakery"}, "--sysupdate-url"},
		{sysextHashOptions{Flavor: FlavorBaked, File: "k.raw"}, "are for --flavor sysext"},
		{sysextHashOptions{Flavor: FlavorSysextBaked, InsecureNoHash: true}, "are for --flavor sysext"},
		{sysextHashOptions{Flavor: FlavorSysext, File: "k.raw", InsecureNoHash: true}, "contradict each other"},
	} {
		if err := c.o.Validate(); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.o, err)
		}
	}
	for _, o := range []sysextHashOptions{
		{Flavor: FlavorBaked},
		{Flavor: FlavorSysextBaked, SysupdateURL: "https://10.0.0.5/bakery"},
		{Flavor: FlavorSysext, File: "k.raw"},
		{Flavor: FlavorSysext, InsecureNoHash: true},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestImageRefOptionsValidate(t *testing.T) {
	sum := strings.Repeat("ab", 64)
	for _, c := range []struct {
		o    imageRefOptions
		want string
	}{
		{imageRefOptions{Ref: ImageRefFilter, ID: "1234"}, "--image-id is for --image-ref id or orc"},
		{imageRefOptions{Ref: ImageRefID}, "--image-ref id needs the Glance ID"},
		{imageRefOptions{Ref: ImageRefFilter, SHA512Given: true}, "--image-sha512 is for --image-source"},
		{imageRefOptions{Ref: ImageRefORC, Source: &ImageSource{URL: "http://x/i.qcow2"}}, "--image-source needs the image's sha512"},
	} {
		if err := c.o.Validate(); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.o, err)
		}
	}
	for _, o := range []imageRefOptions{
		{Ref: ImageRefFilter},
		{Ref: ImageRefID, ID: "1234"},
		{Ref: ImageRefID, SetID: "1234"}, // --set OPENSTACK_FLATCAR_IMAGE_ID=
		{Ref: ImageRefORC, Source: &ImageSource{URL: "http://x/i.qcow2", SHA512: sum}, SHA512Given: true},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestLintOptionsValidate(t *testing.T) {
	if err := (lintOptions{CAPIVersion: "one.two"}).Validate(); !errors.Is(err, errs.ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid --capi-version: ") {
		t.Errorf("bad version: %v", err)
	}
	for _, v := range []string{"", NewestCAPIVersion, "1.3.5"} {
		if err := (lintOptions{CAPIVersion: v}).Validate(); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestWithImageRepositoryRules(t *testing.T) {
	manifest := []byte("kind: KubeadmControlPlane\nspec:\n  kubeadmConfigSpec:\n    clusterConfiguration:\n      apiServer: {}\n")
	for _, repo := range []string{"", "https://registry.example/k8s", "registry.example/k8s/", "reg ${X}"} {
		if _, err := withImageRepository(manifest, repo); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "invalid --image-repository") {
			t.Errorf("%q: %v", repo, err)
		}
	}
	if _, err := withImageRepository([]byte("kind: Secret\n"), "registry.example:5000/k8s"); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "no kubeadm clusterConfiguration") {
		t.Errorf("no clusterConfiguration: %v", err)
	}
	out, err := withImageRepository(manifest, "registry.example:5000/k8s")
	if err != nil || !strings.Contains(string(out), "    clusterConfiguration:\n      imageRepository: registry.example:5000/k8s\n      apiServer: {}\n") {
		t.Errorf("%v\n%s", err, out)
	}
}
