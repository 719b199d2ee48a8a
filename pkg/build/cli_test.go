package build_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// Bad flag values are usage errors (exit 2) naming the flag, before anything is downloaded.
func TestBuildUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--method", "vmware"}, nil, `invalid --method "vmware"`},
		{[]string{"--base", "azure"}, nil, `invalid --base "azure"`},
		{nil, []string{"FLATCAR_CAPO_BASE=azure"}, `invalid --base "azure"`},
		{[]string{"--disk-size", "12x"}, nil, "invalid --disk-size"},
		{[]string{"--disk-size", "1000"}, nil, "whole number of MiB"},
		{[]string{"--kubernetes-version", "1.33.4"}, nil, "--kubernetes-version"},
		{nil, []string{"FLATCAR_CAPO_KUBERNETES_MIRROR=ftp://mirror"}, "--kubernetes-mirror"},
		{[]string{"--on-exists", "keep"}, nil, "--on-exists"},
		{[]string{"--channel", "nightly"}, nil, "nightly"},
		{[]string{"extra-arg"}, nil, "argument"},
	} {
		r := testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"build", "--release-server", "http://127.0.0.1:9/{channel}"}, tc.args...), Env: tc.env})
		r.MustFail(t, 2, tc.want)
	}
}

func TestBuildHelpShowsPinnedDefaults(t *testing.T) {
	r := testutil.Run(t, "build", "--help").MustSucceed(t)
	for _, want := range []string{kubernetes.DefaultVersion, kubernetes.DefaultCrictlVersion, kubernetes.DefaultCNIVersion,
		"--kubernetes-mirror", "--github-mirror", "--provision", "--dry-run", "--disk-size", "--cloud", "--method"} {
		if !strings.Contains(r.Stdout, want) {
			t.Fatalf("build --help lacks %q", want)
		}
	}
}
