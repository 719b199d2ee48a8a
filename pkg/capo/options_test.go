package capo

import (
	"errors"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

func TestParseSets(t *testing.T) {
	for _, s := range []string{"WORKER_MACHINE_COUNT", "=3"} {
		if _, err := ParseSets([]string{s}); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "is not VAR=value") {
			t.Errorf("--set %q: %v", s, err)
		}
	}
	v, err := ParseSets([]string{"A=1", "B=x=y", "A=2", "C="})
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
		if _, err := SysextURL(c.flavor, c.url); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v", c.flavor, c.url, err)
		}
	}
	if v, err := SysextURL(FlavorSysext, "https://10.0.0.5/ext//"); err != nil || v != "https://10.0.0.5/ext" {
		t.Errorf("%q %v", v, err)
	}
}

func TestSysextHashOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    SysextHashOptions
		want string
	}{
		{SysextHashOptions{Flavor: FlavorSysext, SysupdateURL: "10.0.0.5/bakery"}, "--sysupdate-url"},
		{SysextHashOptions{Flavor: FlavorBaked, File: "k.raw"}, "are for --flavor sysext"},
		{SysextHashOptions{Flavor: FlavorSysextBaked, InsecureNoHash: true}, "are for --flavor sysext"},
		{SysextHashOptions{Flavor: FlavorSysext, File: "k.raw", InsecureNoHash: true}, "contradict each other"},
	} {
		if err := c.o.Validate(); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.o, err)
		}
	}
	for _, o := range []SysextHashOptions{
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
