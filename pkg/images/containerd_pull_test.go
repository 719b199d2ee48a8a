package images_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// nodeContainerd runs the real containerd version with the containerd files n gives the node.
func nodeContainerd(t *testing.T, version string, n images.Node, env ...string) *registrytest.Containerd {
	t.Helper()
	files, err := n.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	var nf []registrytest.NodeFile
	for _, f := range files {
		nf = append(nf, registrytest.NodeFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	return registrytest.StartContainerdOf(t, version, nf, env)
}

// After boot, containerd's CRI pulls an image that was not preloaded where each set-up's
// files say, and nowhere else (registry.k8s.io itself is unreachable here: a pull that went
// upstream fails). Each server logs what it saw.
//   - catch-all + CA: only certs.d/_default, so registry.k8s.io goes to the mirror (the old
//     per-registry file for the CA sent it upstream);
//   - --node-registry-auth: without the login the htpasswd mirror answers 401, with it the pull works;
//   - two ordered mirrors, the first down, the second path-prefixed (Harbor's /v2/PROJECT);
//   - that mirror through an HTTP proxy that wants a login, named by a host only the proxy knows.
//
// Each on every containerd of registrytest.ContainerdMatrix (Flatcar stable's, beta's, upstream's).
func TestContainerdPullsAsTheNodeFilesSay(t *testing.T) {
	testutil.RequireRoot(t, "runs containerd")
	reg := registrytest.Start(t)
	ctx := context.Background()
	push := func(repo string) string {
		t.Helper()
		img, err := registrytest.Image{Arch: "amd64", Files: map[string][]byte{repo: []byte(repo)}}.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Push(ctx, reg.Host+"/"+repo+":v1", img); err != nil {
			t.Fatal(err)
		}
		return "registry.k8s.io/" + repo + ":v1"
	}
	one, two, three := push("app/one"), push("app/two"), push("app/three")
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	regAuth, err := images.NodeAuth([]string{reg.Host})
	if err != nil {
		t.Fatal(err)
	}

	for _, v := range registrytest.ContainerdMatrix {
		t.Run("containerd-"+v, func(t *testing.T) { // one at a time: CPU is the limit, not waiting
			t.Run("catch-all with CA and node auth", func(t *testing.T) {
				n := images.Node{Mirrors: mirrors(t, "*=https://"+reg.Host), CAFile: reg.CAFile, Registries: []string{"registry.k8s.io", "quay.io"}}
				c := nodeContainerd(t, v, n)
				if out, err := c.Pull(one); err == nil || !strings.Contains(out, "no basic auth credentials") {
					t.Errorf("pull without the node's login: %v\n%s", err, out)
				}
				if _, err := os.Stat(filepath.Join(c.Dir, node.InRoot(node.ContainerdCertsDir), "registry.k8s.io")); err == nil {
					t.Error("a certs.d/registry.k8s.io directory exists: it would bypass the catch-all")
				}
				n.Auth = regAuth
				c = nodeContainerd(t, v, n)
				if out, err := c.Pull(one); err != nil {
					t.Fatalf("pull through the catch-all mirror: %v\n%s\n%s", err, out, c.Log())
				}
				if log := c.Log(); !strings.Contains(log, "https://"+reg.Host+"/v2/app/one") || strings.Contains(log, "https://registry.k8s.io/v2/") {
					t.Errorf("containerd's requests (want the mirror only):\n%s", log)
				}
				if st, _ := os.Stat(filepath.Join(c.Dir, node.InRoot(node.ContainerdAuthDropIn))); st == nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v, want 0600", node.ContainerdAuthDropIn, st)
				}
			})

			proxy := registrytest.StartPrefixProxy(t, reg, "k8s-cache")
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			down := ln.Addr().String()
			ln.Close()

			t.Run("ordered mirrors, first down, path-prefixed", func(t *testing.T) {
				ms := mirrors(t, "registry.k8s.io=http://"+down, fmt.Sprintf("registry.k8s.io=http://%s/v2/k8s-cache", proxy.Host))
				auth, _ := images.NodeAuth([]string{reg.Host})
				auth[0].Host = proxy.Host // the proxy passes the registry's login challenge through
				c := nodeContainerd(t, v, images.Node{Mirrors: ms, Auth: auth})
				if out, err := c.Pull(two); err != nil {
					t.Fatalf("pull: %v\n%s\n%s", err, out, c.Log())
				}
				if !seenPath(proxy.Seen(), "/v2/k8s-cache/app/two/manifests/v1") {
					t.Errorf("the path-prefixed mirror never served app/two: %v", proxy.Seen())
				}
				for _, s := range proxy.Seen() {
					if p := strings.SplitN(s, " ", 2)[1]; p != "/v2/" && p != "/v2" && !strings.HasPrefix(p, "/v2/k8s-cache/") {
						t.Errorf("the mirror was asked %s, outside its project", s)
					}
				}
			})

			// --registry-mirror-only: the last mirror is the server, so with the mirror down the pull
			// fails naming it and nothing else; without the flag containerd then tries registry.k8s.io.
			t.Run("mirror only", func(t *testing.T) {
				ms := mirrors(t, "registry.k8s.io=http://"+down)
				c := nodeContainerd(t, v, images.Node{Mirrors: ms, MirrorOnly: true})
				out, err := c.Pull(two)
				if err == nil || !strings.Contains(c.Log(), "http://"+down+"/v2/app/two") || strings.Contains(c.Log(), "https://registry.k8s.io/v2/") {
					t.Errorf("mirror-only pull with the mirror down: %v\n%s\n%s", err, out, c.Log())
				}
				c = nodeContainerd(t, v, images.Node{Mirrors: ms})
				if _, err = c.Pull(two); err == nil || !strings.Contains(c.Log(), "https://registry.k8s.io/v2/app/two") {
					t.Errorf("with the upstream fallback the last try is registry.k8s.io itself: %v\n%s", err, c.Log())
				}
			})

			t.Run("through an HTTP proxy with a login", func(t *testing.T) {
				fwd := registrytest.StartForwardProxy(t, proxy.Host, "proxyuser", "proxy-pass-27")
				_, port, _ := net.SplitHostPort(proxy.Host)
				mirrorHost := "mirror.flatcar-capo.test:" + port // only the proxy can reach it
				n := images.Node{Mirrors: mirrors(t, "registry.k8s.io=http://"+mirrorHost+"/v2/k8s-cache"),
					HTTPProxy: "http://proxyuser:proxy-pass-27@" + fwd.Host, Auth: []images.HostAuth{{Host: mirrorHost, Username: registrytest.User, Password: registrytest.Password}}}
				files, _ := n.Files(0)
				var env []string
				for _, f := range files {
					if f.Path == node.InRoot(node.ProxyEnvFile) {
						env = envFile(t, string(f.Content))
					}
				}
				c := nodeContainerd(t, v, n, env...)
				if out, err := c.Pull(three); err != nil {
					t.Fatalf("pull through the proxy: %v\n%s\n%s", err, out, c.Log())
				}
				if !seenPath(fwd.Seen(), "http://"+mirrorHost+"/v2/k8s-cache/app/three/manifests/v1") {
					t.Errorf("the HTTP proxy did not carry the pull: %v", fwd.Seen())
				}
				for _, s := range fwd.Seen() {
					if strings.Contains(s, "no proxy login") {
						t.Errorf("a request came without the proxy login: %s", s)
					}
				}
			})
		})
	}
}

func seenPath(seen []string, want string) bool {
	for _, s := range seen {
		if _, url, _ := strings.Cut(s, " "); strings.SplitN(url, "?", 2)[0] == want { // containerd adds ?ns=<registry>
			return true
		}
	}
	return false
}

// envFile reads KEY="VALUE" lines as systemd's EnvironmentFile= does for what we write.
func envFile(t *testing.T, content string) []string {
	t.Helper()
	var env []string
	for _, l := range strings.Split(content, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		v = strings.TrimSuffix(strings.TrimPrefix(v, `"`), `"`)
		env = append(env, k+"="+strings.NewReplacer(`\\`, `\`, `\"`, `"`, "\\`", "`", `\$`, `$`).Replace(v))
	}
	return env
}
