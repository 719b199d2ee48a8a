package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
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
	for _, want := range []string{"stable", "v<minor>.0", kubernetes.DefaultCNIVersion,
		"--kubernetes-mirror", "--github-mirror", "--provision", "--dry-run", "--disk-size", "--cloud", "--method"} {
		if !strings.Contains(r.Stdout, want) {
			t.Fatalf("build --help lacks %q", want)
		}
	}
}

// --dry-run shows the version stable or a minor resolved to, in the plan and the image name;
// a marker the mirror lacks is a failure naming its URL.
func TestBuildDryRunResolvesKubernetesVersion(t *testing.T) {
	m := kubetest.New(t, kubernetes.Options{})
	m.SetMarker("stable-1.35.txt", []byte("v1.35.2\n"))
	base := filepath.Join(t.TempDir(), "base.img")
	os.WriteFile(base, make([]byte, 4096), 0o644)
	args := func(v string) []string {
		return []string{"build", "--dry-run", "--method", "sysext", "--base-image", base, "--version", "4459.2.0",
			"--kubernetes-mirror", m.KubernetesMirror(), "--github-mirror", m.GitHubMirror(), "--kubernetes-version", v}
	}
	var rec struct {
		ImageName string `json:"imageName"`
		Plan      struct {
			KubernetesVersion, KubernetesRequested, CrictlVersion string
		} `json:"plan"`
	}
	out := testutil.Run(t, append(args("v1.35"), "-o", "json")...).MustSucceed(t)
	if err := json.Unmarshal([]byte(out.Stdout), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ImageName != "flatcar-stable-4459.2.0-kube-v1.35.2-sysext" || rec.Plan.KubernetesVersion != "v1.35.2" ||
		rec.Plan.KubernetesRequested != "v1.35" || rec.Plan.CrictlVersion != "v1.35.0" {
		t.Errorf("plan: %+v", rec)
	}
	r := testutil.Run(t, args("stable")...).MustSucceed(t)
	if !strings.Contains(r.Stdout, "kubernetes:  "+kubetest.Version+" (--kubernetes-version stable)") {
		t.Errorf("text plan lacks the resolved version:\n%s", r.Stdout)
	}
	testutil.Run(t, args("1.99")...).MustFail(t, 1, m.KubernetesMirror()+"/stable-1.99.txt", "exact --kubernetes-version")
}
