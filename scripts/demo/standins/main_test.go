package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestStandinsServeWhatTheDemoUses runs the program `make demo` starts, as the demo does: it
// serves a release that `release` and `fetch` accept with the demo keyring, a Kubernetes mirror
// whose .sha256 files match, keeps its ports for a rerun, and stops on SIGTERM.
func TestStandinsServeWhatTheDemoUses(t *testing.T) {
	testutil.RequireTools(t, standin.Tools...)
	testutil.RequireRoot(t, "building the stand-in guest (mmdebstrap)")
	prog := filepath.Join(t.TempDir(), "standins")
	testutil.MustRun(t, "go", "build", "-o", prog, ".")
	dir := t.TempDir()
	env := start(t, prog, dir)

	rel := testutil.Run(t, "release", "--release-server", env["RELEASE_SERVER"], "--image", "openstack").MustSucceed(t)
	if !strings.Contains(rel.Stdout, standin.Version) {
		t.Errorf("release does not name %s:\n%s", standin.Version, rel.Stdout)
	}
	img := filepath.Join(t.TempDir(), "openstack.img")
	testutil.Run(t, "fetch", "--release-server", env["RELEASE_SERVER"], "--keyring", env["KEYRING"],
		"--image", "openstack", "--cache-dir", t.TempDir(), "--output-file", img, "-q").MustSucceed(t)
	// Another key than the demo's must be refused: the signature is really checked.
	testutil.Run(t, "fetch", "--release-server", env["RELEASE_SERVER"], "--image", "openstack",
		"--cache-dir", t.TempDir(), "--output-file", img+".2", "-q").MustFail(t, 1)

	base := env["KUBERNETES_MIRROR"] + "/" + env["KUBERNETES_VERSION"] + "/bin/linux/amd64/kubelet"
	data, sum := httpGet(t, base), httpGet(t, base+".sha256")
	got := sha256.Sum256(data)
	if want := strings.Fields(string(sum)); len(want) == 0 || want[0] != hex.EncodeToString(got[:]) {
		t.Errorf("kubelet.sha256 %q does not match the served kubelet (%x)", sum, got)
	}

	// The registry holds the stand-in kubeadm's images behind its login, over TLS from the demo CA.
	manifest := registryGet(t, env, "/v2/kube-apiserver/manifests/"+env["KUBERNETES_VERSION"])
	if !strings.Contains(manifest, "layers") {
		t.Errorf("the registry has no kube-apiserver:%s manifest: %s", env["KUBERNETES_VERSION"], manifest)
	}

	ports, err := os.ReadFile(filepath.Join(dir, "ports"))
	if err != nil {
		t.Fatal(err)
	}
	stop(t, env)
	// A rerun in the same directory serves the same URLs (what lets build reuse its artifact).
	env2 := start(t, prog, dir)
	if env2["RELEASE_SERVER"] != env["RELEASE_SERVER"] || env2["KUBERNETES_MIRROR"] != env["KUBERNETES_MIRROR"] ||
		env2["REGISTRY"] != env["REGISTRY"] || testutil.SHA256File(t, env2["REGISTRY_CA"]) != testutil.SHA256File(t, env["REGISTRY_CA"]) {
		t.Errorf("rerun moved the servers (ports were %q): %v then %v", ports, env, env2)
	}
	stop(t, env2)
}

// start runs the program and waits for its standins.env; the process is stopped at test end.
func start(t *testing.T, prog, dir string) map[string]string {
	t.Helper()
	cmd := exec.Command(prog, "-dir", dir)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	envFile := filepath.Join(dir, "standins.env")
	deadline := time.Now().Add(20 * time.Minute) // a first stand-in build on a loaded machine
	for {
		if b, err := os.ReadFile(envFile); err == nil {
			env := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				k, v, _ := strings.Cut(l, "=")
				env[k] = v
			}
			env["envFile"] = envFile
			stopFns[envFile] = func() error {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case err := <-done:
					return err
				case <-time.After(30 * time.Second):
					return os.ErrDeadlineExceeded
				}
			}
			return env
		}
		select {
		case err := <-done:
			t.Fatalf("standins exited before serving: %v\n%s", err, log.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("standins did not serve within 20 min\n%s", log.String())
		}
	}
}

var stopFns = map[string]func() error{}

// stop sends SIGTERM and checks the program ends cleanly, closes its ports and removes its env file.
func stop(t *testing.T, env map[string]string) {
	t.Helper()
	if err := stopFns[env["envFile"]](); err != nil {
		t.Fatalf("standins did not stop cleanly on SIGTERM: %v", err)
	}
	if _, err := os.Stat(env["envFile"]); !os.IsNotExist(err) {
		t.Errorf("standins.env left behind after stop (%v)", err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(env["RELEASE_SERVER"], "http://"), "/{channel}")
	for what, a := range map[string]string{"release server": addr, "registry": env["REGISTRY"]} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s %s still answers after stop", what, a)
		}
	}
}

// registryGet reads path from the registry with the login of the env's docker config.
func registryGet(t *testing.T, env map[string]string, path string) string {
	t.Helper()
	ca, err := os.ReadFile(env["REGISTRY_CA"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg, err := os.ReadFile(filepath.Join(env["DOCKER_CONFIG"], "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dc struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(cfg, &dc); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://"+env["REGISTRY"]+path, nil)
	req.Header.Set("Authorization", "Basic "+dc.Auths[env["REGISTRY"]].Auth)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
	c := http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return string(b)
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	return b
}
