package capo_test

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	kubeadmv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// A self-hosted bakery (sysext create + sysext publish, served on 127.0.0.1) and manifests
// --flavor sysext against it: the CLC transpiles to Ignition whose sysext entry carries
// verification.hash = sha512-<hex> of the served file, the sysupdate transfer is the published
// one, and a wrong or missing .sha512 is reported.
func TestSysextPublishAndVerifiedManifests(t *testing.T) {
	testutil.RequireTools(t, "sha256sum")
	m := kubetest.New(t, kubernetes.Options{})
	dir := t.TempDir()
	ext := filepath.Join(dir, "ext")
	os.Mkdir(ext, 0o755)
	raw := filepath.Join(ext, "kubernetes-"+kubetest.Version+"-x86-64.raw")
	testutil.Run(t, "sysext", "create", "--kubernetes-version", kubetest.Version, "--output-file", raw, "--cache-dir", filepath.Join(dir, "cache"),
		"--kubernetes-mirror", m.KubernetesMirror(), "--github-mirror", m.GitHubMirror()).MustSucceed(t)
	data, _ := os.ReadFile(raw)
	s512, s256 := sha512.Sum512(data), sha256.Sum256(data)
	sum := hex.EncodeToString(s512[:])

	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	base := srv.URL + "/ext"
	testutil.Run(t, "sysext", "publish", ext, "--url", base).MustSucceed(t)

	// The bakery layout: SHA256SUMS as sha256sum writes it, the transfer of the minor, noop.conf.
	sums, _ := os.ReadFile(filepath.Join(ext, "SHA256SUMS"))
	if string(sums) != hex.EncodeToString(s256[:])+"  "+filepath.Base(raw)+"\n" {
		t.Errorf("SHA256SUMS: %q", sums)
	}
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = ext
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	conf := get(t, base+"/kubernetes/kubernetes-v1.33.conf") // the bakery's place and name
	if flat := get(t, base+"/kubernetes-1.33.conf"); flat != conf {
		t.Errorf("the flat kubernetes-1.33.conf of earlier versions differs from kubernetes/kubernetes-v1.33.conf:\n%s", flat)
	}
	for _, want := range []string{"[Transfer]\nVerify=false\n", "[Source]\nType=url-file\nPath=" + base + "/\nMatchPattern=kubernetes-v1.33.@v-%a.raw\n",
		"[Target]\nInstancesMax=3\nType=regular-file\nPath=/opt/extensions/kubernetes\nCurrentSymlink=/etc/extensions/kubernetes.raw\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("kubernetes-v1.33.conf lacks %q:\n%s", want, conf)
		}
	}
	if noop := get(t, base+"/noop.conf"); !strings.Contains(noop, "MatchPattern=invalid@v.raw") {
		t.Errorf("noop.conf: %s", noop)
	}
	// systemd >= 257 reads .transfer, LTS's 255 only .conf: the same transfers under both names.
	if tr := get(t, base+"/kubernetes/kubernetes-v1.33.transfer"); tr != conf {
		t.Errorf("kubernetes-v1.33.transfer differs from kubernetes-v1.33.conf:\n%s", tr)
	}
	if tr := get(t, base+"/noop.transfer"); tr != get(t, base+"/noop.conf") {
		t.Errorf("noop.transfer differs from noop.conf:\n%s", tr)
	}
	if served := get(t, base+"/"+filepath.Base(raw)+".sha512"); !strings.HasPrefix(served, sum+"  ") {
		t.Errorf(".sha512 served: %q", served)
	}

	args := []string{"manifests", "--flavor", "sysext", "--kubernetes-version", kubetest.Version, "--sysext-url", base}
	cfg := workerIgnition(t, testutil.Run(t, append(args, "--sysupdate-url", base)...).MustSucceed(t).Stdout)
	var sysextFile, transfer *igntypes.File
	for i, f := range cfg.Storage.Files {
		switch f.Path {
		case "/opt/extensions/kubernetes/" + filepath.Base(raw):
			sysextFile = &cfg.Storage.Files[i]
		case "/etc/sysupdate.kubernetes.d/kubernetes-v1.33.conf": // CAPO's flatcar-sysext name
			transfer = &cfg.Storage.Files[i]
		}
	}
	if sysextFile == nil || sysextFile.Contents.Verification.Hash == nil || *sysextFile.Contents.Verification.Hash != "sha512-"+sum ||
		sysextFile.Contents.Source != base+"/"+filepath.Base(raw) {
		t.Fatalf("sysext file entry: %+v", sysextFile)
	}
	if transfer == nil || dataURL(t, transfer.Contents.Source) != conf {
		t.Errorf("the sysupdate transfer is not the published kubernetes-v1.33.conf: %+v", transfer)
	}
	timer := false
	for _, u := range cfg.Systemd.Units {
		timer = timer || u.Name == "systemd-sysupdate.timer" && u.Enabled != nil && *u.Enabled
	}
	if !timer {
		t.Error("systemd-sysupdate.timer is not enabled")
	}

	// --sysext FILE gives the same hash without asking the server.
	cfg = workerIgnition(t, testutil.Run(t, "manifests", "--flavor", "sysext", "--kubernetes-version", kubetest.Version,
		"--sysext-url", "http://127.0.0.1:9/ext", "--sysext", raw).MustSucceed(t).Stdout)
	if h := cfg.Storage.Files[0].Contents.Verification.Hash; h == nil || *h != "sha512-"+sum {
		t.Errorf("--sysext FILE: hash %v", h)
	}

	// A wrong .sha512 on the server, then none: reported with the URL and the fix.
	os.WriteFile(raw+".sha512", []byte(strings.Repeat("ab", 64)+"  "+filepath.Base(raw)+"\n"), 0o644)
	testutil.Run(t, args...).MustFail(t, 1, base+"/"+filepath.Base(raw)+".sha512 is wrong", "sysext publish")
	os.Remove(raw + ".sha512")
	testutil.Run(t, args...).MustFail(t, 1, base+"/"+filepath.Base(raw)+".sha512", "--insecure-no-hash")
	cfg = workerIgnition(t, testutil.Run(t, append(args, "--insecure-no-hash")...).MustSucceed(t).Stdout)
	if cfg.Storage.Files[0].Contents.Verification.Hash != nil {
		t.Error("--insecure-no-hash still sets verification.hash")
	}
	testutil.Run(t, "manifests", "--flavor", "baked", "--insecure-no-hash").MustFail(t, 2, "--flavor sysext")
	testutil.Run(t, "sysext", "publish", t.TempDir(), "--url", base).MustFail(t, 1, "no .raw")
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v", u, err, resp)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// workerIgnition transpiles the workers' additionalConfig of a rendered manifest.
func workerIgnition(t *testing.T, manifest string) igntypes.Config {
	t.Helper()
	docs, err := capo.ParseDocuments("m", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Kind != "KubeadmConfigTemplate" {
			continue
		}
		v, err := capo.DecodeUpstream(d)
		if err != nil {
			t.Fatal(err)
		}
		var clc string
		switch k := v.(type) {
		case *kubeadmv1beta2.KubeadmConfigTemplate: // manifests' default
			clc = k.Spec.Template.Spec.Ignition.ContainerLinuxConfig.AdditionalConfig
		case *kubeadmv1beta1.KubeadmConfigTemplate:
			clc = k.Spec.Template.Spec.Ignition.ContainerLinuxConfig.AdditionalConfig
		}
		res := capo.TranspileCLC(clc)
		if res.Fatal || len(res.Issues) > 0 {
			t.Fatalf("CLC: %v", res.Issues)
		}
		return res.Ignition
	}
	t.Fatal("no KubeadmConfigTemplate")
	return igntypes.Config{}
}

func dataURL(t *testing.T, src string) string {
	t.Helper()
	s, ok := strings.CutPrefix(src, "data:,")
	if !ok {
		t.Fatalf("not a data URL: %.40s", src)
	}
	d, err := url.PathUnescape(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
