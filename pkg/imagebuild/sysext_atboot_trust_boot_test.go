package imagebuild_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// TestSysextAtBootTrustsTheCAAndUsesTheProxy is issue 27's first-boot proof of the sysext
// flavor: `manifests --flavor sysext --ca-file CA --https-proxy URL` (a test CA, a proxy with a
// login), its worker's bootstrap data as CABPK makes it (Ignition 2.3), booted in the stand-in
// guest (containerd 2.1.5 built in, as Flatcar's). At first boot Ignition downloads the Kubernetes
// sysext from an HTTPS mirror whose certificate only that CA signs, checks its sha512, and the
// sysext is merged (kubeadm and kubelet run from /usr). Ignition 2.3 has no proxy setting, so that
// download goes direct (the proxy saw none of it; `manifests` warns about it). After boot the
// proxy is containerd's: a pull from a registry (same CA) goes through the proxy's CONNECT with
// the login, trusting the CA from the trust store. systemd-sysupdate is not in the stand-in
// (Debian 12's systemd has no binary): its proxy drop-in is read, not run.
func TestSysextAtBootTrustsTheCAAndUsesTheProxy(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "mmdebstrap", "docker-registry")
	dir := t.TempDir()
	image := standin.CopyImage(t, standin.Image(t, standin.Options{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}}))
	// The real kubeadm, kubelet and kubectl in the sysext (scripts/install-kubernetes.sh).
	mirror := kubetest.NewReal(t, kubetest.RealNodeDir(t), registrytest.ContainerdDir(t))
	ext := filepath.Join(dir, realSysextFile)
	testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"sysext", "create", "--kubernetes-version", kubetest.RealVersion, "--output-file", ext}, mirror.Args()...)}).MustSucceed(t)
	raw, err := os.ReadFile(ext)
	if err != nil {
		t.Fatal(err)
	}
	reg := registrytest.Start(t)
	img, err := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"after-boot": []byte("after boot")}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Push(context.Background(), reg.Host+"/app/after-boot:v1", img); err != nil {
		t.Fatal(err)
	}
	pushed := len(reg.Seen())
	files := reg.ServeFiles(t, map[string][]byte{"/ext/" + realSysextFile: raw})
	proxy := registrytest.StartForwardProxy(t, reg.Host, "proxyuser", "proxy-pass-27")
	guest := func(host string) string { // the guest reaches the host's 127.0.0.1:PORT at GuestHostIP:PORT
		return registrytest.GuestHostIP + host[strings.LastIndex(host, ":"):]
	}
	proxyURL := "http://" + proxy.User + ":" + proxy.Pass + "@" + guest(proxy.Host)

	manifest := filepath.Join(dir, "cluster.yaml")
	testutil.Run(t, append([]string{"manifests", "--flavor", "sysext", "--capi-api", "v1beta2", "--image-name", "flatcar-stable", "--output-file", manifest,
		"--sysext-url", "https://" + guest(files.Host) + "/ext", "--sysext", ext, "--ca-file", reg.CAFile, "--https-proxy", proxyURL},
		capitest.ManifestSets("trust", kubetest.RealVersion)...)...).MustSucceed(t)
	ign, key := cabpkIgnition(t, manifest)
	start := time.Now()
	g := standin.Boot(t, image, standin.BootOptions{Ignition: ign, Key: key, Timeout: 900 * time.Second})
	t.Logf("boot with the at-boot sysext download: %.0fs", time.Since(start).Seconds())
	ssh := func(cmd string) string {
		t.Helper()
		out, err := g.SSH(cmd)
		if err != nil {
			diag, _ := g.SSH("sudo cat /run/ignition.log | tail -20; sudo journalctl -b --no-pager -u containerd.service | tail -20")
			t.Fatalf("%v\n%s\n%s", err, out, diag)
		}
		return strings.TrimSpace(out)
	}

	if want := "GET /ext/" + realSysextFile; !slices.Contains(files.Seen(), want) {
		t.Errorf("the HTTPS mirror was not asked %q: %q", want, files.Seen())
	}
	for _, s := range proxy.Seen() {
		if strings.Contains(s, guest(files.Host)) {
			t.Errorf("the sysext download went through the proxy (Ignition 2.3 has none): %s", s)
		}
	}
	for _, c := range []struct{ cmd, want string }{
		{"systemd-sysext list --no-pager", "kubernetes"},
		{"readlink /etc/extensions/kubernetes.raw", "/opt/extensions/kubernetes/" + realSysextFile},
		{"/usr/bin/kubelet --version", "Kubernetes " + kubetest.RealVersion},
		{"test -x /usr/bin/kubeadm && echo kubeadm", "kubeadm"},
		{"cat " + capo.NodeCAFile, strings.TrimSpace(string(mustRead(t, reg.CAFile)))},
		{"sudo stat -c %a " + capo.NodeProxyEnvFile, "600"},
		{"systemctl show -p EnvironmentFiles --value containerd.service", capo.NodeProxyEnvFile},
		{"cat /etc/systemd/system/systemd-sysupdate.service.d/10-flatcar-capo-proxy.conf", "EnvironmentFile=" + capo.NodeProxyEnvFile},
	} {
		if got := ssh(c.cmd); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.cmd, got, c.want)
		}
	}

	// After boot, containerd pulls through the proxy (CONNECT with the login) and trusts the
	// registry by the CA Ignition put into /etc/ssl/certs.
	ref := guest(reg.Host) + "/app/after-boot:v1"
	ssh("sudo " + registrytest.CrictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock --timeout 120s pull --creds " +
		registrytest.User + ":" + registrytest.Password + " " + ref)
	if want := "CONNECT " + guest(reg.Host); !slices.Contains(proxy.Seen(), want) {
		t.Errorf("the proxy did not carry the pull (%q): %q", want, proxy.Seen())
	}
	for _, s := range proxy.Seen() {
		if strings.Contains(s, "no proxy login") {
			t.Errorf("a request came without the proxy login: %s", s)
		}
	}
	if saw := reg.Seen()[pushed:]; !servedBlobs(saw, "/v2/app/after-boot") {
		t.Errorf("the registry never served app/after-boot: %q", saw)
	}
}

// guestIP is the address QEMU's user network gives the guest: the API endpoint the management
// cluster would put into every node's bootstrap data (CAPO: the load balancer's or the node's).
const guestIP = "10.0.2.15"

// cabpkIgnition creates the cluster of manifest (the stand-in's test user, a fresh key:
// returned, added to the KubeadmControlPlane's users) on the real management side, plays CAPO
// with guestIP as the endpoint, and returns the bootstrap data Secret CABPK wrote for the first
// control-plane Machine: the guest's Ignition (fw_cfg, as the stand-in image's platform, qemu,
// reads it; the node proof gives it on a config drive, as Nova).
func cabpkIgnition(t *testing.T, manifest string) (ign []byte, key string) {
	t.Helper()
	_, key = standin.TestUser(t)
	login := capitest.Additions{Users: []capitest.User{{Name: standin.TestUserName, SSHKey: string(mustRead(t, key+".pub")), Groups: "sudo"}}}
	if err := capitest.AddToSpecs(manifest, login, capitest.Additions{}); err != nil {
		t.Fatal(err)
	}
	m := capitest.Start(t, capitest.Options{Pairing: capitest.Pairings[0], InfrastructureCRDs: true,
		Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane}})
	return m.CreateCluster(t, manifest, guestIP+":6443").BootstrapData(t, true, 5*time.Minute).UserData, key
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
