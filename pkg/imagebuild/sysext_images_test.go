package imagebuild_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/rootfstest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// TestBuildSysextPreloadsImages: `build --method sysext` lists kubeadm's images with the stand-in
// kubeadm itself, pulls them (plus --image) from a real registry (TLS from a test CA, htpasswd
// login from the docker config) through --registry-mirror, and bakes into ROOT the OCI archive
// under kubeadm's names, the import unit ordered before kubelet and kubeadm, and the containerd
// settings; the record lists every image with its digest; a --force rebuild fetches nothing.
// Then the bad inputs, each refused with its fix and no artifact left.
// proxyPassword is in the --https-proxy URL: only the image's root-only file may hold it.
const proxyPassword = "proxy-s3cret-27"

func TestBuildSysextPreloadsImages(t *testing.T) {
	testutil.RequireTools(t, "mkfs.ext4", "mkfs.btrfs", "e2fsck", "debugfs", "docker-registry")
	mirror := kubetest.New(t, kubernetes.Options{})
	reg := registrytest.Start(t)
	ctx := context.Background()
	pushed, err := reg.PushKubeadm(ctx, kubetest.KubeadmImages("v1.33.4", ""))
	if err != nil {
		t.Fatal(err)
	}
	extra := reg.Host + "/cni/plugin:v1"
	cni, _ := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"cni": []byte("cni")}}.Build()
	cniDigest, err := reg.Push(ctx, extra, cni)
	if err != nil {
		t.Fatal(err)
	}
	base := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	env := []string{"DOCKER_CONFIG=" + reg.DockerConfig}
	args := func(out string, extra ...string) []string {
		a := []string{"build", "--method", "sysext", "--base-image", base, "--version", "4459.2.0",
			"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", out,
			"--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile,
			"--https-proxy", "http://proxyuser:" + proxyPassword + "@proxy.example:3128", "--no-proxy", "10.0.0.0/8,.cluster.local", "--node-registry-auth"}
		return append(append(a, mirror.Args()...), extra...)
	}
	out := filepath.Join(dir, "out")
	res := testutil.RunCmd(t, testutil.Cmd{Args: args(out, "--image", extra), Env: env}).MustSucceed(t)
	if strings.Contains(res.Combined(), registrytest.Password) || strings.Contains(res.Combined(), proxyPassword) {
		t.Fatal("the output shows the registry or the proxy password")
	}
	if !strings.Contains(res.Combined(), "warning: the proxy URL carries a password: the image will hold it") || !strings.Contains(res.Combined(), "warning: --node-registry-auth: the image will hold registry logins") {
		t.Errorf("no warning that the image carries the proxy password:\n%s", res.Combined())
	}
	name := "flatcar-stable-4459.2.0-kube-v1.33.4-sysext"
	qcow2 := filepath.Join(out, name+".qcow2")
	rec, err := record.Read(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{extra: cniDigest.String()}
	for n, d := range pushed.Digest {
		want[n] = d
	}
	if len(rec.Images) != 8 {
		t.Fatalf("record lists %d images, want 8: %+v", len(rec.Images), rec.Images)
	}
	for _, im := range rec.Images {
		if want[im.Name] != im.Digest || im.Platform != "linux/amd64" || im.Size <= 0 {
			t.Errorf("record image %+v, pushed digest %s", im, want[im.Name])
		}
	}
	raw, _ := json.Marshal(rec)
	if strings.Contains(string(raw), registrytest.Password) || strings.Contains(string(raw), proxyPassword) {
		t.Error("the record holds the registry or the proxy password")
	}
	if st, err := os.Stat(qcow2); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the image carries the proxy password, yet it is not 0600 on the host: %v %v", st.Mode(), err)
	}

	rawImg := filepath.Join(t.TempDir(), "out.raw")
	testutil.Run(t, "convert", qcow2, rawImg).MustSucceed(t)
	root := rootfstest.ExtractRoot(t, rawImg)
	rootfstest.Fsck(t, root, "of the ROOT with preloaded images")
	dump := func(p string) string {
		t.Helper()
		f := filepath.Join(t.TempDir(), "f")
		testutil.MustRun(t, "debugfs", "-R", "dump /"+p+" "+f, root)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("/%s: %v", p, err)
		}
		return string(b)
	}
	// The archive: kubeadm's names, the digests pushed, every blob once.
	archive := filepath.Join(t.TempDir(), "images.tar")
	testutil.MustRun(t, "debugfs", "-R", "dump "+node.ImagesArchive+" "+archive, root)
	names := archiveNames(t, archive)
	for n, d := range want {
		if names[n] != d {
			t.Errorf("archive names %s -> %q, want %s", n, names[n], d)
		}
	}
	unit := dump(node.InRoot(node.ImportUnit))
	for _, w := range []string{"Before=kubelet.service kubeadm.service", "After=containerd.service", "ExecStart=" + node.ImportScript} {
		if !strings.Contains(unit, w) {
			t.Errorf("import unit lacks %q:\n%s", w, unit)
		}
	}
	if got := rootfstest.Stat(t, root, node.ImportWants); got.Type != "symlink" || got.LinkTarget != node.ImportUnit {
		t.Errorf("%s: %+v", node.ImportWants, got)
	}
	for _, u := range []string{"kubelet", "kubeadm"} {
		d := dump("etc/systemd/system/" + u + ".service.d/05-flatcar-capo-images.conf")
		if !strings.Contains(d, "After="+node.ImportUnitName) || !strings.Contains(d, "Wants="+node.ImportUnitName) {
			t.Errorf("%s drop-in: %s", u, d)
		}
	}
	// The proxy: a root-only environment file (it holds the password), read by both drop-ins;
	// NO_PROXY starts with the node-local entries.
	for _, u := range []string{"containerd", "kubelet"} {
		p := "etc/systemd/system/" + u + ".service.d/10-flatcar-capo-proxy.conf"
		if d := dump(p); !strings.Contains(d, "EnvironmentFile="+node.ProxyEnvFile+"\n") || strings.Contains(d, proxyPassword) {
			t.Errorf("%s proxy drop-in: %s", u, d)
		}
		if st := rootfstest.Stat(t, root, "/"+p); st.Mode != 0o644 {
			t.Errorf("%s: mode %o", p, st.Mode)
		}
	}
	penv := dump(node.InRoot(node.ProxyEnvFile))
	for _, w := range []string{`HTTPS_PROXY="http://proxyuser:` + proxyPassword + `@proxy.example:3128"`, `https_proxy="http://proxyuser:`, `NO_PROXY="localhost,127.0.0.1,169.254.169.254,10.0.0.0/8,.cluster.local"`} {
		if !strings.Contains(penv, w) {
			t.Errorf("%s lacks %q:\n%s", node.ProxyEnvFile, w, penv)
		}
	}
	// --node-registry-auth: the mirror's login from the docker config, root-only, for the CRI.
	if a := dump(node.InRoot(node.ContainerdAuthDropIn)); !strings.Contains(a, `[plugins."io.containerd.grpc.v1.cri".registry.configs."`+reg.Host+`".auth]`) || !strings.Contains(a, `password = "`+registrytest.Password+`"`) {
		t.Errorf("%s:\n%s", node.ContainerdAuthDropIn, a)
	}
	if st := rootfstest.Stat(t, root, node.ContainerdAuthDropIn); st.Mode != 0o600 {
		t.Errorf("%s: mode %o, want 0600", node.ContainerdAuthDropIn, st.Mode)
	}
	if st := rootfstest.Stat(t, root, node.ProxyEnvFile); st.Mode != 0o600 || st.UID != 0 {
		t.Errorf("%s: mode %o uid %d, want 0600 root", node.ProxyEnvFile, st.Mode, st.UID)
	}
	script := dump(node.InRoot(node.ImportScript))
	for _, w := range []string{"ctr -n k8s.io images import", images.PinnedLabel, `rm -f "$archive"`} {
		if !strings.Contains(script, w) {
			t.Errorf("import script lacks %q", w)
		}
	}
	if st := rootfstest.Stat(t, root, node.ImportScript); st.Mode != 0o755 {
		t.Errorf("import script mode %o", st.Mode)
	}
	hosts := dump(node.InRoot(node.ContainerdCertsDir) + "/registry.k8s.io/hosts.toml")
	for _, w := range []string{`server = "https://registry.k8s.io"`, `[host."https://` + reg.Host + `"]`, `capabilities = ["pull", "resolve"]`, `ca = "/etc/containerd/certs.d/registry.k8s.io/ca.crt"`} {
		if !strings.Contains(hosts, w) {
			t.Errorf("hosts.toml lacks %q:\n%s", w, hosts)
		}
	}
	ca, _ := os.ReadFile(reg.CAFile)
	if dump(node.InRoot(node.ContainerdCertsDir)+"/registry.k8s.io/ca.crt") != string(ca) || dump(node.InRoot(node.RegistryCA)) != string(ca) {
		t.Error("the CA is not in certs.d and the trust store")
	}
	conf := dump(node.InRoot(node.ContainerdConfDropIn))
	for _, w := range []string{`sandbox_image = "registry.k8s.io/pause:` + kubetest.PauseTag + `"`, `config_path = "/etc/containerd/certs.d"`, "SystemdCgroup = true", "version = 2"} {
		if !strings.Contains(conf, w) {
			t.Errorf("containerd drop-in lacks %q:\n%s", w, conf)
		}
	}

	// inspect lists them (name, digest, platform, size) with the settings, from the image alone.
	ins := testutil.Run(t, "inspect", rawImg, "--for", "openstack", "-o", "json").MustSucceed(t)
	var rep struct {
		Verdict    string
		Containerd struct {
			Images []struct {
				Name, Digest, Platform string
				Size                   int64
				InArchive              bool
			}
			Kubeadm, Missing []string
			SandboxImage     string
			Registries       []struct {
				Registry string
				Mirrors  []string
				CA       bool
			}
			ImportUnit bool
			Proxy      struct {
				HTTPSProxy, NoProxy string
				HasPassword         bool
			}
			AuthHosts []string
		}
	}
	if strings.Contains(ins.Stdout, proxyPassword) || strings.Contains(ins.Stdout, registrytest.Password) {
		t.Error("inspect shows a password")
	}
	if err := json.Unmarshal([]byte(ins.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Containerd
	if len(c.Images) != 8 || len(c.Kubeadm) != 7 || len(c.Missing) != 0 || !c.ImportUnit || c.SandboxImage != "registry.k8s.io/pause:"+kubetest.PauseTag {
		t.Errorf("inspect containerd: %+v", c)
	}
	for _, im := range c.Images {
		if want[im.Name] != im.Digest || !im.InArchive || im.Platform != "linux/amd64" || im.Size <= 0 {
			t.Errorf("inspect image %+v", im)
		}
	}
	if len(c.Registries) != 2 || c.Registries[1].Registry != "registry.k8s.io" || len(c.Registries[1].Mirrors) != 1 || !c.Registries[1].CA {
		t.Errorf("inspect registries: %+v", c.Registries)
	}
	if p := c.Proxy; !p.HasPassword || p.HTTPSProxy != "http://REDACTED@proxy.example:3128" || p.NoProxy != "localhost,127.0.0.1,169.254.169.254,10.0.0.0/8,.cluster.local" {
		t.Errorf("inspect proxy: %+v", p)
	}
	if len(c.AuthHosts) != 1 || c.AuthHosts[0] != reg.Host {
		t.Errorf("inspect authHosts: %v", c.AuthHosts)
	}
	text := testutil.Run(t, "inspect", rawImg, "--for", "openstack").MustSucceed(t)
	if !strings.Contains(text.Stdout, "Containerd: 8 preloaded images") || !strings.Contains(text.Stdout, pushed.Digest[pushed.Index]) ||
		!strings.Contains(text.Stdout, "registry registry.k8s.io: mirrors [https://"+reg.Host+"] (in order), then https://registry.k8s.io") ||
		!strings.Contains(text.Stdout, "(the image carries the proxy password)") || !strings.Contains(text.Stdout, "registry logins for the CRI") {
		t.Errorf("inspect text:\n%s", text.Stdout)
	}

	t.Run("dry run lists the images and their total size", func(t *testing.T) {
		o := filepath.Join(dir, "dry")
		r := testutil.RunCmd(t, testutil.Cmd{Args: args(o, "--image", extra, "--dry-run", "-o", "json"), Env: env}).MustSucceed(t)
		var rec struct {
			Plan struct {
				Images imagebuild.ImagesDryRun
			}
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil {
			t.Fatal(err)
		}
		p := rec.Plan.Images
		var sum int64
		for _, im := range p.Images {
			if want[im.Name] != im.Digest || im.Size <= 0 {
				t.Errorf("dry-run image %+v", im)
			}
			sum += im.Size
		}
		if len(p.Images) != 8 || p.Unknown != 0 || p.TotalBytes != sum || !strings.Contains(p.Kubeadm, "cached kubeadm") {
			t.Errorf("dry-run images: %+v", p)
		}
		text := testutil.RunCmd(t, testutil.Cmd{Args: args(o, "--dry-run"), Env: env}).MustSucceed(t)
		if h := p.Hosts[node.ContainerdCertsDir+"/registry.k8s.io/hosts.toml"]; !strings.Contains(h, `[host."https://`+reg.Host+`"]`) || p.HTTPSProxy != "http://REDACTED@proxy.example:3128" || len(p.NodeAuth) != 1 {
			t.Errorf("dry-run settings: %+v", p)
		}
		if strings.Contains(r.Stdout, proxyPassword) {
			t.Error("the dry run shows the proxy password")
		}
		if !strings.Contains(text.Stdout, "total: ") || !strings.Contains(text.Stdout, "registry.k8s.io/etcd:"+kubetest.EtcdTag) ||
			!strings.Contains(text.Stdout, "node "+node.ContainerdCertsDir+"/registry.k8s.io/hosts.toml:") || !strings.Contains(text.Stdout, "node proxy:   HTTP_PROXY= HTTPS_PROXY=http://REDACTED@proxy.example:3128") {
			t.Errorf("dry-run text:\n%s", text.Stdout)
		}
		noArtifactIn(t, o)
	})

	t.Run("a forced rebuild fetches nothing", func(t *testing.T) {
		res := testutil.RunCmd(t, testutil.Cmd{Args: args(out, "--image", extra, "--force"), Env: env}).MustSucceed(t)
		if !strings.Contains(res.Stderr, "0 blobs fetched (0.0 MiB), ") {
			t.Errorf("warm rebuild fetched blobs:\n%s", res.Stderr)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		noArtifact := noArtifactIn
		o := filepath.Join(dir, "bad1")
		testutil.RunCmd(t, testutil.Cmd{Args: args(o, "--image", reg.Host+"/cni/plugin:v9"), Env: env}).MustFail(t, 1, reg.Host+"/cni/plugin:v9", "no such image")
		noArtifact(t, o)
		o = filepath.Join(dir, "bad2")
		wrong := reg.DockerConfigWith(t, registrytest.User, "not-the-"+registrytest.Password)
		r := testutil.RunCmd(t, testutil.Cmd{Args: args(o, "--force"), Env: []string{"DOCKER_CONFIG=" + wrong}}).MustFail(t, 1, "registry "+reg.Host+" refused the credentials")
		if strings.Contains(r.Combined(), "not-the-") {
			t.Error("the wrong password is shown")
		}
		noArtifact(t, o)
		o = filepath.Join(dir, "bad3")
		a := args(o, "--image", reg.Host+"/other:v1")
		for i := range a {
			if a[i] == reg.CAFile {
				a[i-1], a[i] = "--keep-updates", "--keep-updates"
			}
		}
		testutil.RunCmd(t, testutil.Cmd{Args: a, Env: env}).MustFail(t, 1, "not trusted", "--registry-ca", "--ca-file")
		noArtifact(t, o)
		// --ca-file instead: the build host trusts the registry, the node gets no CA.
		o = filepath.Join(dir, "cafile")
		a = args(o, "--ca-file", reg.CAFile)
		for i := range a {
			if a[i] == reg.CAFile && a[i-1] == "--registry-ca" {
				a[i-1], a[i] = "--keep-updates", "--keep-updates"
			}
		}
		testutil.RunCmd(t, testutil.Cmd{Args: a, Env: env}).MustSucceed(t)
		img := filepath.Join(t.TempDir(), "cafile.raw")
		testutil.Run(t, "convert", filepath.Join(o, name+".qcow2"), img).MustSucceed(t)
		if ls := testutil.MustRun(t, "debugfs", "-R", "ls -l "+node.ContainerdCertsDir+"/registry.k8s.io", rootfstest.ExtractRoot(t, img)); strings.Contains(ls, "ca.crt") {
			t.Errorf("--ca-file went into the node:\n%s", ls)
		}
		testutil.RunCmd(t, testutil.Cmd{Args: args(filepath.Join(dir, "bad4"), "--registry-mirror", "registry.k8s.io"), Env: env}).MustFail(t, 2, "REGISTRY=URL")
		// Issue 27's hostile values: each refused with its rule, exit 2, nothing written.
		for i, c := range []struct{ mirror, want string }{
			{"..=https://" + reg.Host, "empty label"},
			{".=https://" + reg.Host, "empty label"},
			{"evil\nname=https://" + reg.Host, "control character"},
			{"registry.k8s.io:99999=https://" + reg.Host, "1-65535"},
			{"registry.k8s.io=https://ev\"il:5000", "quote"},
			{"registry.k8s.io/pause=https://" + reg.Host, "is a registry, not a repository"},
		} {
			o := filepath.Join(dir, fmt.Sprintf("hostile%d", i))
			testutil.RunCmd(t, testutil.Cmd{Args: args(o, "--registry-mirror", c.mirror), Env: env}).MustFail(t, 2, c.want, "REGISTRY=URL")
			if _, err := os.Stat(o); err == nil {
				t.Errorf("--registry-mirror %q: %s was created", c.mirror, o)
			}
		}
		testutil.RunCmd(t, testutil.Cmd{Args: args(filepath.Join(dir, "bad7"), "--no-proxy", "a b"), Env: env}).MustFail(t, 2, "--no-proxy")
		testutil.RunCmd(t, testutil.Cmd{Args: args(filepath.Join(dir, "bad5"), "--image", "Bad Ref"), Env: env}).MustFail(t, 2, "invalid image reference")
		testutil.RunCmd(t, testutil.Cmd{Args: args(filepath.Join(dir, "bad6"), "--registry-ca", "/etc/hostname"), Env: env}).MustFail(t, 2, "no PEM certificate")
	})

	t.Run("disk full while writing images", func(t *testing.T) {
		testutil.RequireRoot(t, "mounts a small tmpfs as the image cache")
		full := t.TempDir()
		testutil.MustRun(t, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", full)
		defer exec.Command("umount", full).Run()
		o := filepath.Join(dir, "full")
		a := args(o, "--force")
		for i := range a {
			if a[i] == filepath.Join(dir, "cache") {
				a[i] = full
			}
		}
		testutil.RunCmd(t, testutil.Cmd{Args: a, Env: env}).MustFail(t, 1, "no space left on device", "image cache")
		noArtifactIn(t, o)
	})
}

// noArtifactIn fails when out holds anything but build's .NAME.lock (kept by design).
func noArtifactIn(t *testing.T, out string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(out, "*"))
	var kept []string
	for _, f := range left {
		if b := filepath.Base(f); !(strings.HasPrefix(b, ".") && strings.HasSuffix(b, ".lock")) {
			kept = append(kept, f)
		}
	}
	if len(kept) != 0 {
		t.Errorf("a refused build left %v", kept)
	}
}

// archiveNames reads an OCI archive's index.json: containerd name -> digest.
func archiveNames(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	blobs := map[string]bool{}
	testutil.EachTarEntry(t, f, func(h *tar.Header, body io.Reader) {
		if blobs[h.Name] {
			t.Errorf("%s twice in the archive", h.Name)
		}
		blobs[h.Name] = true
		if h.Name == "index.json" {
			var idx v1.IndexManifest
			if err := json.NewDecoder(body).Decode(&idx); err != nil {
				t.Fatal(err)
			}
			for _, m := range idx.Manifests {
				out[m.Annotations[images.AnnotationImageName]] = m.Digest.String()
			}
		}
	})
	return out
}
