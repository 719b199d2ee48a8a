package imagebuild_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// TestGuestPullsAsTheNodeFilesSay is issue 27's guest proof of the registry set-ups: the
// stand-in guest with Flatcar's containerd-flatcar sysext (real containerd 2.1.5), isolated
// (no route to the host or the internet), gets the node's files as `build` writes them for one
// node that holds every set-up under its own registry name, and `crictl pull` of images that
// were not preloaded goes where each set-up says and nowhere else:
//   - catch-all `*=https://REGISTRY` + --registry-ca: registry.k8s.io/app/one from the TLS
//     registry (no certs.d/registry.k8s.io to bypass it);
//   - authenticated: the same pull without --node-registry-auth is refused (401), with it works;
//   - two ordered mirrors, the first down: ordered.test/app/two is tried there, then served by
//     the registry;
//   - path-prefixed (Harbor's /v2/PROJECT, override_path): harbor.test/app/three;
//   - through an HTTP proxy with a login (--http-proxy): proxied.test/app/four from a mirror host
//     only the proxy knows.
//
// The guest reaches the host's servers only through SSH remote forwards under their host
// addresses (the first mirror's port is not forwarded: it is down). Each server's log shows
// what it saw; containerd's debug log shows it asked no upstream registry.
func TestGuestPullsAsTheNodeFilesSay(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "mmdebstrap", "docker-registry")
	dir := t.TempDir()
	image := standin.CopyImage(t, standin.Image(t, standin.Options{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}}))
	reg := registrytest.Start(t)
	push := func(repo string) {
		t.Helper()
		img, err := registrytest.Image{Arch: "amd64", Files: map[string][]byte{repo: []byte(repo)}}.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Push(context.Background(), reg.Host+"/"+repo+":v1", img); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{"app/one", "app/two", "app/three", "app/four"} {
		push(r)
	}
	harbor := registrytest.StartPrefixProxy(t, reg, "k8s-cache")
	fwd := registrytest.StartForwardProxy(t, harbor.Host, "proxyuser", "proxy-pass-27")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	_, harborPort, _ := net.SplitHostPort(harbor.Host)
	onlyProxy := "mirror.flatcar-capo.test:" + harborPort // a name only the proxy resolves
	ms, err := images.ParseMirrors([]string{
		"*=https://" + reg.Host,
		"ordered.test=http://" + down, "ordered.test=https://" + reg.Host,
		"harbor.test=http://" + harbor.Host + "/v2/k8s-cache",
		"proxied.test=http://" + onlyProxy + "/v2/k8s-cache",
	})
	if err != nil {
		t.Fatal(err)
	}
	login := func(host string) images.HostAuth {
		return images.HostAuth{Host: host, Username: registrytest.User, Password: registrytest.Password}
	}
	setup := images.Node{Mirrors: ms, CAFile: reg.CAFile, Registries: []string{"registry.k8s.io", "quay.io"},
		HTTPProxy: "http://" + fwd.User + ":" + fwd.Pass + "@" + fwd.Host}

	ign, key := standin.TestUser(t)
	g := standin.Boot(t, image, standin.BootOptions{Ignition: ign, Key: key, Isolated: true, Timeout: 600 * time.Second})
	for _, host := range []string{reg.Host, harbor.Host, fwd.Host} {
		stop, err := g.ForwardRemote(host, host)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	ssh := func(cmd string) string {
		t.Helper()
		out, err := g.SSH(cmd)
		if err != nil {
			diag, _ := g.SSH("sudo journalctl -b --no-pager -u containerd.service | tail -30")
			t.Fatalf("%v\n%s\ncontainerd:\n%s", err, out, diag)
		}
		return strings.TrimSpace(out)
	}
	crictl := "sudo " + registrytest.CrictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 120s "

	// Without --node-registry-auth the registry refuses the catch-all's pull.
	writeNodeFiles(t, g, setup)
	if out, err := g.SSH(crictl + "pull registry.k8s.io/app/one:v1 2>&1"); err == nil || !strings.Contains(out+err.Error(), "401") && !strings.Contains(out+err.Error(), "no basic auth credentials") {
		t.Errorf("pull without the node's login: %v\n%s", err, out)
	}

	setup.Auth = []images.HostAuth{login(reg.Host), login(harbor.Host), login(onlyProxy)}
	since := ssh("sleep 1; date +%s") // after every line of the first start's log
	writeNodeFiles(t, g, setup)
	before := map[string]int{"registry": len(reg.Seen()), "harbor": len(harbor.Seen()), "proxy": len(fwd.Seen())}
	for _, ref := range []string{"registry.k8s.io/app/one:v1", "ordered.test/app/two:v1", "harbor.test/app/three:v1", "proxied.test/app/four:v1"} {
		start := time.Now()
		ssh(crictl + "pull " + ref)
		t.Logf("crictl pull %s in the guest: %.1fs", ref, time.Since(start).Seconds())
	}
	registry, harborSaw, proxySaw := reg.Seen()[before["registry"]:], harbor.Seen()[before["harbor"]:], fwd.Seen()[before["proxy"]:]
	ctrd := ssh("sudo journalctl --no-pager -o cat -u containerd.service --since @" + since)
	bypass := ssh("test -e " + node.ContainerdCertsDir + "/registry.k8s.io && echo bypass || echo none")
	modes := ssh("sudo stat -c %a " + node.ContainerdAuthDropIn + " " + node.ProxyEnvFile)

	t.Run("catch-all with CA", func(t *testing.T) {
		if bypass != "none" {
			t.Error("certs.d/registry.k8s.io exists in the guest: it would bypass the catch-all")
		}
		if !servedBlobs(registry, "/v2/app/one") {
			t.Errorf("the catch-all registry never served app/one: %q", registry)
		}
		notSeen(t, "app/one", harborSaw, proxySaw)
	})
	t.Run("authenticated", func(t *testing.T) {
		if m := strings.Fields(modes); m[0] != "600" {
			t.Errorf("%s mode %s, want 600", node.ContainerdAuthDropIn, m[0])
		}
	})
	t.Run("ordered mirrors, first down", func(t *testing.T) {
		first, second := strings.Index(ctrd, "http://"+down+"/v2/app/two"), strings.Index(ctrd, "https://"+reg.Host+"/v2/app/two")
		if first < 0 || second < first {
			t.Errorf("containerd did not try the first mirror (%s), then the second: %d, %d", down, first, second)
		}
		if !servedBlobs(registry, "/v2/app/two") {
			t.Errorf("the second mirror never served app/two: %q", registry)
		}
		notSeen(t, "app/two", harborSaw, proxySaw)
	})
	t.Run("path-prefixed", func(t *testing.T) {
		if !servedBlobs(harborSaw, "/v2/k8s-cache/app/three") {
			t.Errorf("the Harbor-like mirror never served app/three: %q", harborSaw)
		}
		for _, s := range harborSaw {
			if _, p, _ := strings.Cut(s, " "); p != "/v2/" && p != "/v2" && !strings.HasPrefix(p, "/v2/k8s-cache/") {
				t.Errorf("the Harbor-like mirror was asked %s, outside its project", s)
			}
		}
		notSeen(t, "app/three", proxySaw)
	})
	t.Run("through an HTTP proxy with a login", func(t *testing.T) {
		if !servedBlobs(proxySaw, "http://"+onlyProxy+"/v2/k8s-cache/app/four") {
			t.Errorf("the proxy did not carry app/four: %q", proxySaw)
		}
		for _, s := range proxySaw {
			if strings.Contains(s, "no proxy login") || !strings.Contains(s, "/app/four/") && !strings.HasSuffix(strings.SplitN(s, "?", 2)[0], "/v2/") {
				t.Errorf("the proxy was asked %s (want app/four's requests, each with the login)", s)
			}
		}
		if m := strings.Fields(modes); m[1] != "600" {
			t.Errorf("%s mode %s, want 600", node.ProxyEnvFile, m[1])
		}
	})
	for _, upstream := range []string{"https://registry.k8s.io/", "https://ordered.test/", "https://harbor.test/", "https://proxied.test/"} {
		if strings.Contains(ctrd, upstream) {
			t.Errorf("containerd asked the upstream registry %s:\n%s", upstream, ctrd)
		}
	}
	if t.Failed() {
		t.Logf("containerd's log:\n%s\nregistry: %q\nharbor: %q\nproxy: %q", ctrd, registry, harborSaw, proxySaw)
	}
}

// notSeen fails when a server's log has a request for repo.
func notSeen(t *testing.T, repo string, logs ...[]string) {
	t.Helper()
	for _, l := range logs {
		for _, s := range l {
			if strings.Contains(s, "/"+repo+"/") {
				t.Errorf("%s went to a server its set-up does not name: %s", repo, s)
			}
		}
	}
}

// servedBlobs says whether a server's log ("METHOD URL") has the tag's manifest asked for and a
// blob fetched under repo (a path or URL; containerd adds ?ns=<registry>): the pull came from there.
func servedBlobs(seen []string, repo string) bool {
	var tag, blob bool
	for _, s := range seen {
		method, u, _ := strings.Cut(s, " ")
		u, _, _ = strings.Cut(u, "?")
		tag = tag || u == repo+"/manifests/v1"
		blob = blob || method == "GET" && strings.HasPrefix(u, repo+"/blobs/sha256:")
	}
	return tag && blob
}

// writeNodeFiles writes the node's files into the guest's root as the build writes them into
// ROOT (modes kept), with containerd's debug log on (the registry requests it makes), and
// restarts containerd with them.
func writeNodeFiles(t *testing.T, g *standin.Guest, n images.Node) {
	t.Helper()
	files, err := n.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, images.File{Path: "etc/containerd/conf.d/99-test-debug.toml", Mode: 0o644, Content: []byte("version = 2\n[debug]\n  level = \"debug\"\n")})
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, f := range files {
		p := "/" + f.Path
		if f.Mode&fs.ModeSymlink != 0 {
			fmt.Fprintf(&script, "mkdir -p \"$(dirname %s)\"\nln -sfn %s %s\n", p, f.Content, p)
			continue
		}
		fmt.Fprintf(&script, "mkdir -p \"$(dirname %s)\"\necho %s | base64 -d > %s\nchmod %o %s\n", p, base64.StdEncoding.EncodeToString(f.Content), p, f.Mode.Perm(), p)
	}
	script.WriteString("systemctl daemon-reload\nsystemctl restart containerd.service\n")
	script.WriteString("for i in $(seq 120); do " + registrytest.CrictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 2s version >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1\n")
	if out, err := g.SSH("echo " + base64.StdEncoding.EncodeToString([]byte(script.String())) + " | base64 -d | sudo sh"); err != nil {
		diag, _ := g.SSH("sudo journalctl -b --no-pager -u containerd.service | tail -30")
		t.Fatalf("writing the node's files: %v\n%s\n%s", err, out, diag)
	}
}
