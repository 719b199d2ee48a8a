package sysext

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// MakeKubernetes is `sysext create` in one call: from --binaries (no network for an exact
// version), the architecture in any spelling, the hashes of the file written, and every bad
// value refused before anything is written or downloaded.
func TestMakeKubernetesFromBinaries(t *testing.T) {
	bin := t.TempDir()
	kubernetesInput(t, bin)
	out := filepath.Join(t.TempDir(), "k.raw")
	opts := func(mod func(*MakeOptions)) MakeOptions {
		o := MakeOptions{Image: CreateOptions{ReleaseID: "_any", Compression: "gzip", Level: DefaultGzipLevel},
			Download: kubernetes.Options{Kubernetes: "v1.33.4", Arch: "x86_64", Mirror: kubernetes.DefaultMirror, GitHubMirror: kubernetes.DefaultGitHubMirror},
			Network:  httpx.Options{Retries: 1}, Binaries: bin, OutputFile: out,
			DefaultCacheDir: func() (string, error) { t.Error("the cache was asked for with --binaries"); return "", nil }}
		if mod != nil {
			mod(&o)
		}
		return o
	}
	made, err := MakeKubernetes(context.Background(), opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if made.Path != out || made.Version != "v1.33.4" || made.Arch != "x86-64" {
		t.Fatalf("made %s (%s, %s), want %s of v1.33.4 x86-64", made.Path, made.Version, made.Arch, out)
	}
	if got := testutil.SHA256File(t, out); made.SHA256 != got {
		t.Errorf("sha256 %s, the file's is %s", made.SHA256, got)
	}
	if got := testutil.SHA512File(t, out); made.SHA512 != got {
		t.Errorf("sha512 %s, the file's is %s", made.SHA512, got)
	}
	info, err := Check(out, KubernetesName, FlatcarHost("amd64"))
	if err != nil {
		t.Fatal(err)
	}
	if a := info.Releases[KubernetesName]["ARCHITECTURE"]; a != "x86-64" {
		t.Errorf("ARCHITECTURE=%s, want x86-64", a)
	}

	bad := map[string]struct {
		mod  func(*MakeOptions)
		want string
	}{
		"no version":  {func(o *MakeOptions) { o.Download.Kubernetes = "" }, "--kubernetes-version is required"},
		"compression": {func(o *MakeOptions) { o.Image.Compression = "xz" }, "--compression"},
		"arch":        {func(o *MakeOptions) { o.Download.Arch = "riscv" }, "invalid --arch"},
		"retries":     {func(o *MakeOptions) { o.Network.Retries = -1 }, "--retries"},
		"mirror":      {func(o *MakeOptions) { o.Download.Mirror = "ftp://mirror" }, "mirror"},
		"output":      {func(o *MakeOptions) { o.OutputFile = filepath.Join(t.TempDir(), "missing", "k.raw") }, "missing"},
	}
	for name, tc := range bad {
		o := opts(tc.mod)
		o.OutputFile = strings.Replace(o.OutputFile, "k.raw", "bad-"+strings.ReplaceAll(name, " ", "-")+".raw", 1)
		_, err := MakeKubernetes(context.Background(), o)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want an invalid-input error naming %q", name, err, tc.want)
		}
		if _, err := os.Stat(o.OutputFile); err == nil {
			t.Errorf("%s: %s was written", name, o.OutputFile)
		}
	}
}

// KubernetesInputFromSet is the one mapping of verified downloads to the sysext's files (the
// sysext build method and `sysext create` both use it).
func TestKubernetesInputFromSet(t *testing.T) {
	set := &kubernetes.Set{Options: kubernetes.Options{Kubernetes: "v1.34.1", Arch: "arm64"}}
	for _, name := range []string{"bin/kubelet", "bin/kubeadm", "bin/kubectl", "cni-plugins.tgz", "crictl.tar.gz"} {
		set.Files = append(set.Files, kubernetes.Downloaded{File: kubernetes.File{Name: name}, Path: "/cache/" + name})
	}
	in := KubernetesInputFromSet(set)
	want := KubernetesInput{Version: "v1.34.1", Arch: "arm64", Kubelet: "/cache/bin/kubelet", Kubeadm: "/cache/bin/kubeadm",
		Kubectl: "/cache/bin/kubectl", CNIPlugins: "/cache/cni-plugins.tgz", Crictl: "/cache/crictl.tar.gz"}
	if in != want {
		t.Errorf("input %+v, want %+v", in, want)
	}
}

// Inspect is `sysext inspect` in one call: the verdict for a name and host, and bad values
// refused as the caller's.
func TestInspectVerdicts(t *testing.T) {
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "kubernetes-v1.33.4-x86-64.raw")
	if _, err := CreateKubernetes(context.Background(), kubernetesInput(t, bin), out); err != nil {
		t.Fatal(err)
	}
	r, err := Inspect(out, InspectOptions{Arch: "amd64", Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.WouldMerge || r.Name != KubernetesName || !r.Verified || r.Release["ARCHITECTURE"] != "x86-64" || r.Problems == nil {
		t.Errorf("report %+v: want a verified kubernetes sysext that merges (and [] problems, not null)", r)
	}
	if r, err = Inspect(out, InspectOptions{Name: "other", Arch: "amd64"}); err != nil || r.WouldMerge || r.Reason == "" {
		t.Errorf("as other.raw: %+v, %v; want a reasoned no", r, err)
	}
	if r, err = Inspect(out, InspectOptions{Arch: "arm64"}); err != nil || r.WouldMerge {
		t.Errorf("on arm64: %+v, %v; want no (an x86-64 sysext)", r, err)
	}
	for _, o := range []InspectOptions{{Name: "../x", Arch: "amd64"}, {Arch: "mips"}} {
		if _, err := Inspect(out, o); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: err %v, want invalid", o, err)
		}
	}
	if _, err := Inspect(out, InspectOptions{Arch: "amd64", OSRelease: filepath.Join(bin, "missing")}); err == nil || !strings.Contains(err.Error(), "--os-release") {
		t.Errorf("a missing --os-release: err %v, want one naming it", err)
	}
}
