package sysext

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

func kubernetesInput(t *testing.T, dir string) KubernetesInput {
	return KubernetesInput{
		Version: "v1.33.4", Arch: "amd64",
		Kubelet: standInBinary(t, dir, "kubelet"), Kubeadm: standInBinary(t, dir, "kubeadm"), Kubectl: standInBinary(t, dir, "kubectl"),
		CNIPlugins: tarGz(t, filepath.Join(dir, "cni-plugins-linux-amd64-v1.7.1.tgz"), map[string]string{"bridge": "b", "host-local": "h", "loopback": "l"}),
		Crictl:     tarGz(t, filepath.Join(dir, "crictl-v1.33.0-linux-amd64.tar.gz"), map[string]string{"crictl": "#!/bin/sh\n"}),
	}
}

// The bakery's layout, every entry root-owned, as the real unsquashfs lists it.
func TestCreateKubernetesLayout(t *testing.T) {
	testutil.RequireTools(t, "unsquashfs")
	dir := t.TempDir()
	out := filepath.Join(dir, "kubernetes-v1.33.4-x86-64.raw")
	in := kubernetesInput(t, dir)
	info, err := CreateKubernetes(context.Background(), in, out)
	if err != nil {
		t.Fatal(err)
	}
	ls := unsquashfsList(t, out)
	want := map[string]string{
		"usr/bin/kubelet": "-rwxr-xr-x", "usr/bin/kubeadm": "-rwxr-xr-x", "usr/bin/kubectl": "-rwxr-xr-x", "usr/bin/crictl": "-rwxr-xr-x",
		"usr/local/bin/cni/bridge": "-rwxr-xr-x", "usr/local/bin/cni/host-local": "-rwxr-xr-x", "usr/local/bin/cni/loopback": "-rwxr-xr-x",
		"usr/lib/systemd/system/kubelet.service":                             "-rw-r--r--",
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf":           "-rw-r--r--",
		"usr/lib/systemd/system/multi-user.target.d/10-kubelet-service.conf": "-rw-r--r--",
		"usr/lib/extension-release.d/extension-release.kubernetes":           "-rw-r--r--",
		"usr": "drwxr-xr-x", "usr/local/bin/cni": "drwxr-xr-x",
	}
	for p, mode := range want {
		e, ok := ls[p]
		if !ok {
			t.Errorf("unsquashfs does not list %s", p)
			continue
		}
		if e.mode != mode {
			t.Errorf("%s: mode %s, want %s", p, e.mode, mode)
		}
	}
	for p, e := range ls {
		if e.owner != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", p, e.owner)
		}
	}
	if _, ok := ls["usr/lib/os-release"]; ok {
		t.Error("the sysext ships usr/lib/os-release")
	}
	if len(ls) != len(info.Files)+1 { // unsquashfs also lists the root directory
		t.Errorf("unsquashfs lists %d entries, Open %d (+ root)", len(ls), len(info.Files))
	}
	rel := unsquashfsCat(t, out, "usr/lib/extension-release.d/extension-release.kubernetes")
	// SYSEXT_VERSION_ID: a build with --sysext reads the Kubernetes version from it.
	if rel != "ID=_any\nARCHITECTURE=x86-64\nEXTENSION_RELOAD_MANAGER=1\nSYSEXT_VERSION_ID="+in.Version+"\n" {
		t.Errorf("extension-release:\n%s", rel)
	}
	unit := unsquashfsCat(t, out, "usr/lib/systemd/system/kubelet.service")
	if !strings.Contains(unit, "ExecStartPre=/usr/bin/cp -a --remove-destination /usr/local/bin/cni/. /opt/cni/bin/") {
		t.Errorf("kubelet.service does not copy the CNI plugins:\n%s", unit)
	}
	if got := unsquashfsCat(t, out, "usr/lib/systemd/system/multi-user.target.d/10-kubelet-service.conf"); !strings.Contains(got, "[Unit]\nUpholds=kubelet.service\n") {
		t.Errorf("upholds drop-in:\n%s", got)
	}
	if info.Compression != "gzip" || info.DefaultName() != "kubernetes" {
		t.Errorf("compression %s, default name %s", info.Compression, info.DefaultName())
	}
	if ok, why := info.WouldMerge("kubernetes", FlatcarHost("amd64")); !ok {
		t.Errorf("Flatcar amd64 would not merge it: %s", why)
	}
	if ok, why := info.WouldMerge("kubernetes", FlatcarHost("arm64")); ok || !strings.Contains(why, "ARCHITECTURE=x86-64, but the host is arm64") {
		t.Errorf("Flatcar arm64: %v %s", ok, why)
	}
	if err := info.Verify(); err != nil {
		t.Fatal(err)
	}
	// Nothing but the output is left next to it.
	if names, _ := filepath.Glob(filepath.Join(dir, ".kubernetes*")); len(names) != 0 {
		t.Errorf("leftovers: %v", names)
	}
}

func unsquashfsCat(t testing.TB, img, p string) string {
	t.Helper()
	out, err := exec.Command("unsquashfs", "-cat", img, p).Output()
	if err != nil {
		t.Fatalf("unsquashfs -cat %s: %v", p, err)
	}
	return string(out)
}

// Without CNI plugins kubelet.service must not try to copy them; ID=flatcar adds SYSEXT_LEVEL;
// zstd is the other compression the kernel reads.
func TestCreateKubernetesVariants(t *testing.T) {
	testutil.RequireTools(t, "unsquashfs")
	dir := t.TempDir()
	in := kubernetesInput(t, dir)
	in.CNIPlugins, in.Crictl, in.ReleaseID, in.Compression, in.Arch = "", "", "flatcar", "zstd", "arm64"
	out := filepath.Join(dir, "k.raw")
	info, err := CreateKubernetes(context.Background(), in, out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Compression != "zstd" {
		t.Errorf("compression %s", info.Compression)
	}
	if rel := unsquashfsCat(t, out, ReleasePath("kubernetes")); rel != "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=arm64\nEXTENSION_RELOAD_MANAGER=1\nSYSEXT_VERSION_ID="+in.Version+"\n" {
		t.Errorf("extension-release:\n%s", rel)
	}
	if unit := unsquashfsCat(t, out, "usr/lib/systemd/system/kubelet.service"); strings.Contains(unit, "cni/.") {
		t.Errorf("kubelet.service copies CNI plugins that are not there:\n%s", unit)
	}
	if ok, why := info.WouldMerge("kubernetes", FlatcarHost("arm64")); !ok {
		t.Error(why)
	}
	if _, ok := unsquashfsList(t, out)["usr/local/bin/cni"]; ok {
		t.Error("an empty CNI directory was created")
	}
}

// Same inputs and time, same bytes (the build record keeps the sysext's sha512).
func TestCreateReproducible(t *testing.T) {
	dir := t.TempDir()
	in := kubernetesInput(t, dir)
	in.ModTime = time.Unix(1764547200, 0)
	var sums []string
	for _, name := range []string{"a.raw", "b.raw"} {
		if _, err := CreateKubernetes(context.Background(), in, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, testutil.SHA256File(t, filepath.Join(dir, name)))
	}
	if sums[0] != sums[1] {
		t.Errorf("two runs differ: %v", sums)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200")
	in.ModTime = time.Time{}
	info, err := CreateKubernetes(context.Background(), in, filepath.Join(dir, "c.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.SHA256File(t, filepath.Join(dir, "c.raw")); got != sums[0] || !info.Created.Equal(time.Unix(1764547200, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH run: %s (created %v), want %s", got, info.Created, sums[0])
	}
}

// go-diskfs' writers have shown bugs above ~8 MiB: a 100+ MiB file (gzip, the default) and a
// 12 MiB one (zstd) must round-trip through the real unsquashfs byte for byte.
func TestCreateLargeRoundTrip(t *testing.T) {
	testutil.RequireTools(t, "unsquashfs")
	for _, c := range []struct {
		compression string
		level       int
		kubelet     int64
	}{{"gzip", 1, 101<<20 + 12345}, {"zstd", 0, 12<<20 + 7}} {
		t.Run(c.compression, func(t *testing.T) {
			dir := t.TempDir()
			in := kubernetesInput(t, dir)
			in.Compression, in.CompressionLevel = c.compression, c.level
			in.Kubelet = bigBinary(t, filepath.Join(dir, "kubelet-big"), c.kubelet)
			in.Kubectl = bigBinary(t, filepath.Join(dir, "kubectl-big"), 9<<20+1)
			out := filepath.Join(dir, "big.raw")
			start := time.Now()
			info, err := CreateKubernetes(context.Background(), in, out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d MiB of files into a %d MiB image in %v", c.compression, info.Bytes>>20, info.Size>>20, time.Since(start).Round(time.Millisecond))
			x := filepath.Join(dir, "x")
			testutil.MustRun(t, "unsquashfs", "-no-progress", "-d", x, out)
			for src, p := range map[string]string{in.Kubelet: "usr/bin/kubelet", in.Kubectl: "usr/bin/kubectl"} {
				if a, b := testutil.SHA256File(t, src), testutil.SHA256File(t, filepath.Join(x, p)); a != b {
					t.Errorf("%s: sha256 %s after unsquashfs, want %s", p, b, a)
				}
			}
			if e, _ := info.Entry("usr/bin/kubelet"); e.Size != c.kubelet {
				t.Errorf("Open reports kubelet size %d", e.Size)
			}
			if err := info.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCreateRefusesBadSpecs(t *testing.T) {
	dir := t.TempDir()
	bin := standInBinary(t, dir, "kubelet")
	rel := Release{"ID": "_any"}
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "kubernetes", Release: rel, Files: []File{{Path: "usr/lib/os-release", Data: []byte("ID=x\n")}}}, "systemd-sysext refuses images that carry an os-release"},
		{Spec{Name: "../x", Release: rel}, "invalid sysext name"},
		{Spec{Name: "k", Release: rel, Files: []File{{Path: "/usr/bin/k", Source: bin}}}, "use a relative path"},
		{Spec{Name: "k", Release: rel, Files: []File{{Path: "../etc/k", Source: bin}}}, "use a relative path"},
		{Spec{Name: "k", Release: rel, Files: []File{{Path: "usr/bin/k", Source: filepath.Join(dir, "missing")}}}, "no such file"},
		{Spec{Name: "k", Release: rel, Files: []File{{Path: "usr/bin/k", Source: dir}}}, "not a regular file"},
		{Spec{Name: "k", Release: rel, Compression: "xz"}, "use gzip or zstd"},
		{Spec{Name: "k", Release: rel, Compression: "gzip", CompressionLevel: 10}, "use 1 (fastest) to 9"},
		{Spec{Name: "k", Release: rel, Compression: "zstd", CompressionLevel: 3}, "zstd takes no compression level"},
		{Spec{Name: "k"}, "extension-release content is empty"},
		{Spec{Name: "k", Release: rel, Files: []File{{Path: "usr/bin/k", Source: bin}, {Path: "usr/bin/k/x", Source: bin}}}, "both a file and a directory"},
	} {
		out := filepath.Join(dir, "out.raw")
		_, err := Create(context.Background(), c.spec, out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.spec, err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%+v: output left behind", c.spec)
		}
	}
	if _, err := KubernetesSpec(KubernetesInput{Version: "1.33.4"}); err == nil || !strings.Contains(err.Error(), "e.g. v1.33.4") {
		t.Errorf("version without v: %v", err)
	}
	if _, err := KubernetesSpec(KubernetesInput{Version: "v1.33.4", Arch: "riscv"}); err == nil || !strings.Contains(err.Error(), "unknown architecture") {
		t.Errorf("arch: %v", err)
	}
	if _, err := KubernetesSpec(KubernetesInput{Version: "v1.33.4", Arch: "amd64", Kubelet: bin}); err == nil || !strings.Contains(err.Error(), "kubeadm binary is missing") {
		t.Errorf("missing kubeadm: %v", err)
	}
	// A cancelled context leaves nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(dir, "cancelled.raw")
	if _, err := Create(ctx, Spec{Name: "k", Release: rel, Files: []File{{Path: "usr/bin/k", Source: bin}}}, out); err == nil {
		t.Error("cancelled Create succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 { // only the kubelet input
		var names bytes.Buffer
		for _, e := range entries {
			names.WriteString(e.Name() + " ")
		}
		t.Errorf("leftovers in %s: %s", dir, names.String())
	}
}

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

// BenchmarkCreateKubernetes makes a Kubernetes-sized sysext: with BENCH_PAYLOAD set to a
// directory of kubelet/kubeadm/kubectl (scripts/bench/sysext-create.sh makes one from real Go
// binaries), from those; else from 100 MiB of generated bytes. Reports MiB/s of input.
func BenchmarkCreateKubernetes(b *testing.B) {
	dir := b.TempDir()
	in := KubernetesInput{Version: "v1.33.4", Arch: "amd64"}
	if p := os.Getenv("BENCH_PAYLOAD"); p != "" {
		var err error
		if in, err = kubernetesInputFromDir(p, "v1.33.4", "amd64"); err != nil {
			b.Fatal(err)
		}
	} else {
		in.Kubelet = bigBinary(b, filepath.Join(dir, "kubelet"), 50<<20)
		in.Kubeadm = bigBinary(b, filepath.Join(dir, "kubeadm"), 30<<20)
		in.Kubectl = bigBinary(b, filepath.Join(dir, "kubectl"), 20<<20)
	}
	var total int64
	for _, p := range []string{in.Kubelet, in.Kubeadm, in.Kubectl} {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		total += fi.Size()
	}
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := CreateKubernetes(context.Background(), in, filepath.Join(dir, "k.raw")); err != nil {
			b.Fatal(err)
		}
	}
}

// kubelet's flex-volume dir defaults under /usr, read-only on Flatcar: the sysext's drop-in
// moves it where the packer method's does (node.VolumePluginDir).
func TestKubeletDropInKeepsVolumePluginsOffUsr(t *testing.T) {
	if !strings.Contains(string(kubeadmDropIn), "--volume-plugin-dir="+node.VolumePluginDir) ||
		!strings.Contains(string(kubeadmDropIn), "$KUBELET_FLATCAR_ARGS $KUBELET_EXTRA_ARGS") {
		t.Errorf("the kubelet drop-in does not set --volume-plugin-dir=%s:\n%s", node.VolumePluginDir, kubeadmDropIn)
	}
}
