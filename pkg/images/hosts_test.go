package images_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// The hostile and wrong --registry-mirror values of issue 27 (and issue 29's a/b=URL): each is
// refused with the rule it breaks, before anything is written.
func TestParseMirrorRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"..=https://m.example", "empty label"},
		{".=https://m.example", "empty label"},
		{"reg\nistry=https://m.example", "control character"},
		{"registry.k8s.io:99999=https://m.example", "port \"99999\" is not a number 1-65535"},
		{"registry.k8s.io:0=https://m.example", "1-65535"},
		{"registry.k8s.io=https://m.example:99999", "1-65535"},
		{"registry.k8s.io=https://ev\"il.example", "quote"},
		{"registry.k8s.io=https://m.example\n", "control character"},
		{"a/b=https://m.example", "is a registry, not a repository"},
		{"fd00::1=https://m.example", "must be in brackets"},
		{"[fd00::1=https://m.example", "unclosed ["},
		{"Bad_Name=https://m.example", "not a DNS label"},
		{"-x.example=https://m.example", "not a DNS label"},
		{"registry.k8s.io=ftp://m.example", "scheme must be http or https"},
		{"registry.k8s.io=https://m.example/project", "does not start with /v2/"},
		{"registry.k8s.io=https://m.example/v2/Bad Project", "space"},
		{"registry.k8s.io=https://u:p@m.example", "credentials go in the docker config"},
		{"registry.k8s.io=https://m.example?x=1", "no query"},
		{"registry.k8s.io", "no REGISTRY="},
		{"=https://m.example", "no REGISTRY="},
	} {
		_, err := images.ParseMirror(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "REGISTRY=URL") {
			t.Errorf("ParseMirror(%q) = %v, want an error with %q and the form", c.in, err, c.want)
		}
	}
	if _, err := images.ParseMirrors([]string{"*=https://a.example", "*=https://a.example"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a mirror given twice: %v", err)
	}
}

func TestParseMirrorAccepts(t *testing.T) {
	for _, c := range []struct {
		in                  string
		reg, url, host, pre string
	}{
		{"*=https://m.example:5000", "*", "https://m.example:5000", "m.example:5000", ""},
		{"Registry.K8s.io=https://M.example/", "registry.k8s.io", "https://m.example", "m.example", ""},
		{"index.docker.io=http://10.0.0.5:5000/v2/", "docker.io", "http://10.0.0.5:5000", "10.0.0.5:5000", ""},
		{"[fd00::1]:5000=https://[fd00::2]:443", "[fd00::1]:5000", "https://[fd00::2]:443", "[fd00::2]:443", ""},
		{"quay.io=https://harbor.example/v2/quay-cache", "quay.io", "https://harbor.example/v2/quay-cache", "harbor.example", "quay-cache"},
		{"registry.k8s.io=https://nexus.example/v2/team/k8s/", "registry.k8s.io", "https://nexus.example/v2/team/k8s", "nexus.example", "team/k8s"},
	} {
		m, err := images.ParseMirror(c.in)
		if err != nil {
			t.Errorf("ParseMirror(%q): %v", c.in, err)
			continue
		}
		if m.Registry != c.reg || m.URL != c.url || m.Host != c.host || m.Prefix != c.pre || m.OverridePath() != (c.pre != "") {
			t.Errorf("ParseMirror(%q) = %+v", c.in, m)
		}
	}
}

// hostsFiles runs Node.Files and returns the certs.d files by path.
func hostsFiles(t *testing.T, n images.Node) map[string]string {
	t.Helper()
	files, err := n.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasPrefix(f.Path, node.InRoot(node.ContainerdCertsDir)+"/") {
			out[strings.TrimPrefix(f.Path, node.InRoot(node.ContainerdCertsDir)+"/")] = string(f.Content)
		}
	}
	return out
}

func mirrors(t *testing.T, vals ...string) images.Mirrors {
	t.Helper()
	ms, err := images.ParseMirrors(vals)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// containerd 2.x uses the first of certs.d/<host>, certs.d/_default that exists, whole: with a
// catch-all and a CA no per-registry file may exist, or that registry bypasses the mirror.
func TestHostsCatchAllWithCA(t *testing.T) {
	ca := writeCA(t)
	got := hostsFiles(t, images.Node{Mirrors: mirrors(t, "*=https://mirror.example:5000"), CAFile: ca,
		Registries: []string{"registry.k8s.io", "quay.io"}})
	if len(got) != 2 || got["_default/ca.crt"] == "" {
		t.Fatalf("want only _default/hosts.toml and its ca.crt, got %v", keys(got))
	}
	want := "\n[host.\"https://mirror.example:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"/etc/containerd/certs.d/_default/ca.crt\"\n"
	h := got["_default/hosts.toml"]
	if !strings.HasSuffix(h, want) || strings.Contains(h, "server =") {
		t.Errorf("_default/hosts.toml (the pulled registry is containerd's own fallback, no server line):\n%s", h)
	}
	// Without a catch-all the CA-only registries get their own file (server + ca).
	got = hostsFiles(t, images.Node{CAFile: ca, Registries: []string{"registry.example:5000"}})
	if h := got["registry.example:5000/hosts.toml"]; !strings.Contains(h, "server = \"https://registry.example:5000\"\nca = \"/etc/containerd/certs.d/registry.example:5000/ca.crt\"\n") {
		t.Errorf("CA-only registry: %v\n%s", keys(got), h)
	}
}

// Several mirrors per registry in the order given, a path-prefixed one with override_path, the
// registry itself last; an exact registry's own file does not need the catch-all.
func TestHostsOrderedAndPrefixed(t *testing.T) {
	got := hostsFiles(t, images.Node{Mirrors: mirrors(t, "registry.k8s.io=https://b.example", "registry.k8s.io=https://harbor.example/v2/k8s", "registry.k8s.io=http://a.example:5000", "*=https://all.example")})
	want := `# flatcar-capo: registry registry.k8s.io; containerd tries the hosts in this order, then the registry itself (server)
server = "https://registry.k8s.io"

[host."https://b.example"]
  capabilities = ["pull", "resolve"]

[host."https://harbor.example/v2/k8s"]
  capabilities = ["pull", "resolve"]
  override_path = true

[host."http://a.example:5000"]
  capabilities = ["pull", "resolve"]
`
	if h := got["registry.k8s.io/hosts.toml"]; h != want {
		t.Errorf("registry.k8s.io/hosts.toml:\n%s\nwant:\n%s", h, want)
	}
	if len(got) != 2 || !strings.Contains(got["_default/hosts.toml"], `[host."https://all.example"]`) {
		t.Errorf("files %v", keys(got))
	}
}

// --registry-mirror-only: the last mirror is the server, so containerd never adds the registry.
func TestHostsMirrorOnly(t *testing.T) {
	ca := writeCA(t)
	got := hostsFiles(t, images.Node{MirrorOnly: true, CAFile: ca, Mirrors: mirrors(t, "docker.io=https://one.example", "docker.io=https://harbor.example/v2/hub", "*=https://all.example")})
	want := `# flatcar-capo: registry docker.io; containerd tries the hosts in this order, the last one (server) included, and nothing else (--registry-mirror-only)
server = "https://harbor.example/v2/hub"
capabilities = ["pull", "resolve"]
override_path = true
ca = "/etc/containerd/certs.d/docker.io/ca.crt"

[host."https://one.example"]
  capabilities = ["pull", "resolve"]
  ca = "/etc/containerd/certs.d/docker.io/ca.crt"
`
	if h := got["docker.io/hosts.toml"]; h != want {
		t.Errorf("docker.io/hosts.toml:\n%s\nwant:\n%s", h, want)
	}
	if h := got["_default/hosts.toml"]; !strings.Contains(h, "server = \"https://all.example\"\n") || strings.Contains(h, "[host.") {
		t.Errorf("_default/hosts.toml:\n%s", h)
	}
}

// A name that reaches Node without ParseMirror (the preloaded refs' registries) is checked too.
func TestHostsRefusesBadDirectory(t *testing.T) {
	for _, r := range []string{"..", ".", "a/b", "x\ny"} {
		if _, err := (images.Node{CAFile: writeCA(t), Registries: []string{r}}).Files(0); err == nil {
			t.Errorf("registry %q: accepted", r)
		}
	}
}

func TestTOMLAndEnvQuoting(t *testing.T) {
	if s, err := images.TOMLString(`a"b\c`); err != nil || s != `"a\"b\\c"` {
		t.Errorf("TOMLString = %s, %v", s, err)
	}
	if s, err := images.EnvFileValue("http://u:p$a`\"\\@h:3128"); err != nil || s != "\"http://u:p\\$a\\`\\\"\\\\@h:3128\"" {
		t.Errorf("EnvFileValue = %s, %v", s, err)
	}
	for _, bad := range []string{"a\nb", "a\x00", "a\rb", "\x7f"} {
		if _, err := images.TOMLString(bad); err == nil {
			t.Errorf("TOMLString(%q) accepted", bad)
		}
		if _, err := images.EnvFileValue(bad); err == nil {
			t.Errorf("EnvFileValue(%q) accepted", bad)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// writeCA is a CA file for Node (which copies it; LoadCA checks PEM, at validation).
func writeCA(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
