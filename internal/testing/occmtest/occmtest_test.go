package occmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// TestPushedImageRunsTheManager pushes the manager's image to a real registry, pulls it back as
// `flatcar-capo build --image` does (pkg/images through the registry.k8s.io mirror), unpacks it
// and runs it as kubelet would run the rendered DaemonSet's container: the image's config with the
// container's args, as uid 1001, chrooted in the image, the rendered Secret's cloud.conf at
// /etc/config. It prints its version, then reads that cloud.conf and logs in to Keystone (a
// stand-in that records the request): the real manager, not our reading, judges the config.
func TestPushedImageRunsTheManager(t *testing.T) {
	testutil.RequireReal(t, "the OpenStack cloud controller manager built by scripts/install-occm.sh and a registry")
	testutil.RequireRoot(t, "running the image's manager chrooted in it")
	dir := Dir(t)
	reg := registrytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	keystone, seen := recordKeystone(t)
	c := Cloud{AuthURL: keystone + "/v3", Username: "occm-user", Password: `pa"ss\word`, Project: "occm-project", Domain: "occm-domain", Region: "RegionTwo"}
	docs := renderedDocs(t, dir, c)
	secret, ds := secretAndDaemonSet(t, docs)
	conf := secret.Data["cloud.conf"]
	if !bytes.Contains(conf, []byte(`auth-url="`+c.AuthURL+`"`)) {
		t.Fatalf("cloud.conf has no auth-url %s:\n%s", c.AuthURL, conf)
	}
	// The node's side: hostNetwork, kubeadm's control-plane label selected, the uninitialized taint tolerated, nothing pulled.
	pod := ds.Spec.Template.Spec
	if sel, ok := pod.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok || sel != "" || !pod.HostNetwork || !tolerates(pod.Tolerations, "node.cloudprovider.kubernetes.io/uninitialized") {
		t.Fatalf("the DaemonSet does not run on a kubeadm control plane before its node is initialized: %+v", pod)
	}
	ctr := pod.Containers[0]
	start := time.Now()
	ref, err := Push(ctx, reg, dir)
	if err != nil {
		t.Fatal(err)
	}
	if ref != "registry.k8s.io/provider-os/openstack-cloud-controller-manager:"+occmVersion {
		t.Fatalf("pushed as %s, want the upstream DaemonSet's ref", ref)
	}
	if ctr.Image != ref || (ctr.ImagePullPolicy != "" && ctr.ImagePullPolicy != corev1.PullIfNotPresent) {
		t.Fatalf("the DaemonSet runs %s (pull policy %q), want the preloaded %s, never pulled", ctr.Image, ctr.ImagePullPolicy, ref)
	}
	cfg, root := pullAndUnpack(t, ctx, reg, ref)
	t.Logf("pushed, pulled and unpacked in %s", time.Since(start).Round(time.Second))

	// The Secret volume, as kubelet mounts it.
	mount := ""
	for _, m := range ctr.VolumeMounts {
		if m.Name == "cloud-config-volume" {
			mount = m.MountPath
		}
	}
	if mount == "" {
		t.Fatalf("no cloud-config-volume mount in %+v", ctr.VolumeMounts)
	}
	if err := os.MkdirAll(filepath.Join(root, mount), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, mount, "cloud.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	// No API server: the manager reads its cloud config (and logs in) before it talks to one.
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(filepath.Join(root, "kubeconfig"), []byte(kubeconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := containerArgv(t, cfg, ctr)

	out := runIn(t, root, append(argv, "--version"))
	if !strings.Contains(out, occmVersion) {
		t.Fatalf("%v --version printed %q, want %s", argv, tail(out), occmVersion)
	}

	// --secure-port=0: no serving here (the DaemonSet's 10258 may be taken on this host).
	out = runIn(t, root, append(argv, "--kubeconfig=/kubeconfig", "--secure-port=0"))
	body := seen()
	if body == nil {
		t.Fatalf("the manager never logged in to Keystone at %s; its output:\n%s", c.AuthURL, tail(out))
	}
	var auth struct {
		Auth struct {
			Identity struct {
				Password struct {
					User struct {
						Name, Password string
						Domain         struct{ Name string }
					}
				}
			}
			Scope struct {
				Project struct {
					Name   string
					Domain struct{ Name string }
				}
			}
		}
	}
	if err := json.Unmarshal(body, &auth); err != nil {
		t.Fatalf("the manager's login: %v\n%s", err, body)
	}
	u, p := auth.Auth.Identity.Password.User, auth.Auth.Scope.Project
	if u.Name != c.Username || u.Password != c.Password || u.Domain.Name != c.Domain || p.Name != c.Project || p.Domain.Name != c.Domain {
		t.Fatalf("the manager logged in as %s/%s (password %v) to project %s/%s, want %s/%s to %s/%s",
			u.Domain.Name, u.Name, u.Password == c.Password, p.Domain.Name, p.Name, c.Domain, c.Username, c.Domain, c.Project)
	}
	if !strings.Contains(out, "401") && !strings.Contains(strings.ToLower(out), "authentication") {
		t.Logf("the manager's output after the refused login:\n%s", tail(out))
	}
}

// TestManifestsAreUpstreams checks what Manifests leaves as upstream ships it, and its refusals.
func TestManifestsAreUpstreams(t *testing.T) {
	testutil.RequireReal(t, "the manifests of scripts/install-occm.sh's build")
	dir := Dir(t)
	c := Cloud{AuthURL: "https://keystone.example:5000/v3", Username: "u", Password: "p", Project: "pr", Domain: "Default", Region: "RegionOne", CAFile: "/etc/ssl/certs/ca.pem"}
	out, err := Manifests(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rolesFile, bindingsFile} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Contains(out, bytes.TrimRight(b, "\n")) {
			t.Errorf("%s is not in the output as shipped", f)
		}
	}
	ds, _ := os.ReadFile(filepath.Join(dir, daemonSet))
	if want := bytes.Replace(bytes.TrimRight(ds, "\n"), []byte(upstreamSelector), []byte(kubeadmSelector), 1); !bytes.Contains(out, want) {
		t.Errorf("the DaemonSet differs from upstream's in more than its nodeSelector")
	}
	kinds := map[string]int{}
	for _, d := range renderedDocs(t, dir, c) {
		kinds[d.kind]++
	}
	if kinds["Secret"] != 1 || kinds["DaemonSet"] != 1 || kinds["ServiceAccount"] != 1 || kinds["List"] != 2 {
		t.Errorf("kinds %v, want the Secret, the two RBAC Lists, the ServiceAccount and the DaemonSet", kinds)
	}
	conf, _ := cloudConf(c)
	if !bytes.Contains(conf, []byte(`ca-file="/etc/ssl/certs/ca.pem"`)) || !bytes.Contains(conf, []byte("[LoadBalancer]\nenabled=false\n")) {
		t.Errorf("cloud.conf:\n%s", conf)
	}
	for _, bad := range []Cloud{{}, {AuthURL: "http://k/v3", Username: "u", Password: "p\nregion=x", Project: "p", Domain: "d", Region: "r"}} {
		if _, err := Manifests(dir, bad); err == nil {
			t.Errorf("Manifests(%+v) rendered", bad)
		}
	}
}

type doc struct {
	kind string
	raw  []byte
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$\n?`)

// renderedDocs renders the manifests and checks every document names its apiVersion and kind.
func renderedDocs(t *testing.T, dir string, c Cloud) []doc {
	t.Helper()
	out, err := Manifests(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	var docs []doc
	for _, d := range docSep.Split(string(out), -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var tm struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(d), &tm); err != nil || tm.APIVersion == "" || tm.Kind == "" {
			t.Fatalf("a document without apiVersion and kind (%v):\n%s", err, d)
		}
		docs = append(docs, doc{tm.Kind, []byte(d)})
	}
	return docs
}

func secretAndDaemonSet(t *testing.T, docs []doc) (corev1.Secret, appsv1.DaemonSet) {
	t.Helper()
	var s corev1.Secret
	var ds appsv1.DaemonSet
	for _, d := range docs {
		var err error
		switch d.kind {
		case "Secret":
			err = yaml.UnmarshalStrict(d.raw, &s)
		case "DaemonSet":
			err = yaml.UnmarshalStrict(d.raw, &ds)
		}
		if err != nil {
			t.Fatalf("%s: %v", d.kind, err)
		}
	}
	if s.Name != "cloud-config" || s.Namespace != "kube-system" || ds.Name == "" || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want the kube-system/cloud-config Secret and the DaemonSet, got %s/%s and %q", s.Namespace, s.Name, ds.Name)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != s.Name {
			t.Fatalf("the DaemonSet mounts Secret %s, not %s", v.Secret.SecretName, s.Name)
		}
	}
	return s, ds
}

func tolerates(ts []corev1.Toleration, key string) bool {
	for _, tl := range ts {
		if tl.Key == key && tl.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// pullAndUnpack pulls ref with the product's puller through the registry.k8s.io mirror, as
// `build --image ref --registry-mirror registry.k8s.io=https://HOST` does, and unpacks its
// layers into a directory: the image's config and that root.
func pullAndUnpack(t *testing.T, ctx context.Context, reg *registrytest.Registry, ref string) (*v1.ConfigFile, string) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	refs, err := images.ParseRefs([]string{ref})
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := images.ParseMirrors([]string{"registry.k8s.io=https://" + reg.Host})
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	res, err := images.Pull(ctx, refs, images.Options{CacheDir: cache, Mirrors: mirrors, CAFile: reg.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	im := res.Images[0]
	if im.Name != ref || im.From != reg.Host {
		t.Fatalf("pulled %s from %s, want %s from %s", im.Name, im.From, ref, reg.Host)
	}
	blob := func(d v1.Hash) []byte {
		b, err := os.ReadFile(images.BlobPath(cache, d))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	md, _ := v1.NewHash(im.ManifestDigest)
	var m v1.Manifest
	if err := json.Unmarshal(blob(md), &m); err != nil {
		t.Fatal(err)
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(blob(m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, l := range m.Layers {
		if err := untar(blob(l.Digest), root); err != nil {
			t.Fatal(err)
		}
	}
	return &cfg, root
}

// untar unpacks a gzip layer's regular files and directories under root.
func untar(gz []byte, root string) error {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode).Perm())
			}
		}
		if err != nil {
			return err
		}
	}
}

// containerArgv is what the runtime executes for ctr in an image with cfg (Kubernetes: command
// replaces the ENTRYPOINT, args the CMD), with $(VAR) expanded from the container's env.
func containerArgv(t *testing.T, cfg *v1.ConfigFile, ctr corev1.Container) []string {
	t.Helper()
	argv := cfg.Config.Entrypoint
	if ctr.Command != nil {
		argv = ctr.Command
	}
	if ctr.Args != nil {
		argv = append(append([]string{}, argv...), ctr.Args...)
	} else if ctr.Command == nil {
		argv = append(append([]string{}, argv...), cfg.Config.Cmd...)
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	var out []string
	for _, a := range argv {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		out = append(out, a)
	}
	if len(out) == 0 || !filepath.IsAbs(out[0]) {
		t.Fatalf("the container runs %q: not a path in the image", out)
	}
	return out
}

// runIn runs argv chrooted in root as the DaemonSet's user (uid 1001), for at most a minute.
func runIn(t *testing.T, root string, argv []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Path = argv[0] // resolved in the chroot
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 1001, Gid: 1001}}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v ran for a minute:\n%s", argv, tail(string(out)))
	}
	t.Logf("%v: %v", argv, err)
	return string(out)
}

// recordKeystone is a stand-in Keystone that keeps the first password login's body and
// refuses it (401): what the manager sent, from what it read in cloud.conf.
func recordKeystone(t *testing.T) (string, func() []byte) {
	var mu sync.Mutex
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v3/auth/tokens") {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			if body == nil {
				body = b
			}
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return body
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// TestFromCloudsYAML reads a clouds.yaml as novatest's GuestCloudsYAML writes it (and users'
// look), into the cloud.conf create_cloud_conf.sh would write, with the interface the guests'
// endpoints are on.
func TestFromCloudsYAML(t *testing.T) {
	clouds := []byte(`clouds:
  other:
    auth: {auth_url: http://other/v3}
  local:
    auth:
      auth_url: http://10.0.0.2:5000/v3
      username: admin
      password: "s3cret"
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
    interface: internal
`)
	c, err := FromCloudsYAML(clouds, "local")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := cloudConf(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "[Global]\nauth-url=\"http://10.0.0.2:5000/v3\"\nusername=\"admin\"\npassword=\"s3cret\"\ntenant-name=\"admin\"\ndomain-name=\"Default\"\nregion=\"RegionOne\"\nos-endpoint-type=\"internal\"\n\n[LoadBalancer]\nenabled=false\n"
	if string(conf) != want {
		t.Errorf("cloud.conf:\n%s\nwant:\n%s", conf, want)
	}
	if _, err := FromCloudsYAML(clouds, "missing"); err == nil || !strings.Contains(err.Error(), `no cloud "missing"`) {
		t.Errorf("a missing cloud: %v", err)
	}
}
