package sysext

import (
	"errors"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

func TestCreateOptionsValidate(t *testing.T) {
	ok := CreateOptions{Kubernetes: "stable", ReleaseID: "_any", Compression: "gzip"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, c := range []struct {
		edit func(*CreateOptions)
		want string
	}{
		{func(o *CreateOptions) { o.Kubernetes = "" }, "--kubernetes-version is required, e.g. --kubernetes-version stable, 1.36 or v"},
		{func(o *CreateOptions) { o.ReleaseID = "debian" }, "_any or flatcar"},
		{func(o *CreateOptions) { o.Compression = "xz" }, "gzip or zstd"},
		{func(o *CreateOptions) { o.Level, o.LevelGiven = 0, true }, "1 (fastest) to 9"},
		{func(o *CreateOptions) { o.Compression, o.Level, o.LevelGiven = "zstd", 3, true }, "--compression-level is gzip's"},
	} {
		o := ok
		c.edit(&o)
		if err := o.Validate(); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", o, err, c.want)
		}
	}
}
