// Command standins serves what `make demo` uses instead of the internet, on 127.0.0.1:
// a Flatcar-layout release of the stand-in guest (internal/testing/standin: the qemu and openstack
// images, DIGESTS signed by a demo key that --keyring passes) and a Kubernetes mirror with
// stand-in binaries and their .sha256 files (internal/testing/kubetest), and a real registry
// (Debian's docker-registry, internal/testing/registrytest: TLS from a demo CA, htpasswd login) holding
// small images under the names the stand-in kubeadm lists, for both builds to preload.
//
//	standins -dir DIR   writes DIR/standins.env (the flags' values) once both servers answer,
//	                    then serves until SIGINT/SIGTERM or until -owner PID goes away.
//
// The ports are kept in DIR/ports: a rerun with the same DIR serves the same URLs, so the build
// record's inputs match and `build` reuses its finished artifact.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

func main() {
	dir := flag.String("dir", "", "state directory (ports, keyring, standins.env)")
	owner := flag.Int("owner", 0, "stop when this process ends (0: never)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: standins -dir DIR [-owner PID]")
		os.Exit(2)
	}
	// The harness's Require* skip unless this is set (the fast tier of `go test`); the demo is no
	// test and must run its real parts, so a skip here would only stop it with no server.
	os.Setenv(testutil.RealEnv, "1")
	t := newTB()
	defer t.cleanup()
	if err := run(t, *dir, *owner); err != nil {
		t.cleanup()
		fmt.Fprintln(os.Stderr, "standins:", err)
		os.Exit(1)
	}
}

func run(t *tb, dir string, owner int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "standins: "+format+"\n", args...) }

	// Built (root + mmdebstrap, a few minutes) once, then cached under the user cache dir.
	start := time.Now()
	for _, oem := range []string{"qemu", "openstack"} {
		if _, err := standin.BuildQcow2(ctx, standin.Options{OEM: oem, Log: logf}); err != nil {
			return fmt.Errorf("stand-in guest (%s): %w", oem, err)
		}
	}
	cache, _ := standin.CacheDir()
	logf("stand-in guest images ready in %s (cache: %s)", time.Since(start).Round(time.Second), cache)

	relLn, mirLn, err := listeners(filepath.Join(dir, "ports"))
	if err != nil {
		return err
	}
	relURL, mirURL := "http://"+relLn.Addr().String(), "http://"+mirLn.Addr().String()

	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{})
	mirror := kubetest.New(t, kubernetes.Options{})
	// The test servers listen on random ports; the same handlers answer on the kept ones.
	go http.Serve(relLn, srv.Config.Handler)
	go http.Serve(mirLn, mirror.Config.Handler)

	// Kept in DIR/registry on the port of the last run, so a rerun's build inputs (mirror, CA) match.
	regPort := 0
	if b, err := os.ReadFile(filepath.Join(dir, "registry-port")); err == nil {
		fmt.Sscan(string(b), &regPort)
	}
	reg, err := registrytest.Serve(filepath.Join(dir, "registry"), regPort)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	t.Cleanup(reg.Stop)
	if err := os.WriteFile(filepath.Join(dir, "registry-port"), []byte(strings.TrimPrefix(reg.Host, "127.0.0.1:")+"\n"), 0o644); err != nil {
		return err
	}
	pushed, err := reg.PushKubeadm(ctx, kubetest.KubeadmImages(mirror.Options.Kubernetes, ""))
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	logf("registry https://%s (docker-registry, demo CA %s) holds kubeadm's %d images: %s",
		reg.Host, reg.CAFile, len(pushed.Refs), strings.Join(pushed.Refs, " "))

	keyring := filepath.Join(dir, "demo-keyring.asc")
	key, err := os.ReadFile(rel.Keyring)
	if err == nil {
		err = os.WriteFile(keyring, key, 0o644)
	}
	if err != nil {
		return err
	}
	o := mirror.Options
	env := fmt.Sprintf("RELEASE_SERVER=%s/{channel}\nKEYRING=%s\nKUBERNETES_MIRROR=%s/release\nGITHUB_MIRROR=%s\n"+
		"KUBERNETES_VERSION=%s\nCRICTL_VERSION=%s\nCNI_VERSION=%s\nFLATCAR_VERSION=%s\n"+
		"REGISTRY=%s\nREGISTRY_CA=%s\nDOCKER_CONFIG=%s\n",
		relURL, keyring, mirURL, mirURL, o.Kubernetes, o.Crictl, o.CNI, rel.Version, reg.Host, reg.CAFile, reg.DockerConfig)
	for _, u := range []string{relURL + "/stable/amd64-usr/current/version.txt", mirURL + "/release/" + o.Kubernetes + "/bin/linux/amd64/kubelet.sha256"} {
		if err := get(u); err != nil {
			return err
		}
	}
	envFile := filepath.Join(dir, "standins.env")
	if err := os.WriteFile(envFile+".tmp", []byte(env), 0o644); err != nil {
		return err
	}
	if err := os.Rename(envFile+".tmp", envFile); err != nil {
		return err
	}
	logf("release server %s/{channel} (Flatcar %s, signed by the demo key %s), Kubernetes mirror %s/release",
		relURL, rel.Version, keyring, mirURL)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			os.Remove(envFile)
			return nil
		case <-tick.C:
			if owner > 0 && syscall.Kill(owner, 0) == syscall.ESRCH {
				os.Remove(envFile)
				return nil
			}
		}
	}
}

// listeners opens the release server's and the mirror's ports: the ones kept in file when both
// are still free, else two new ones (then written to file).
func listeners(file string) (net.Listener, net.Listener, error) {
	if b, err := os.ReadFile(file); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := net.Listen("tcp", "127.0.0.1:"+f[0])
			b, errB := net.Listen("tcp", "127.0.0.1:"+f[1])
			if errA == nil && errB == nil {
				return a, b, nil
			}
			for _, l := range []net.Listener{a, b} {
				if l != nil {
					l.Close()
				}
			}
			fmt.Fprintf(os.Stderr, "standins: the ports kept in %s are taken (%v %v): new ports, so build will not reuse\n", file, errA, errB)
		}
	}
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	ports := fmt.Sprintf("%d %d\n", a.Addr().(*net.TCPAddr).Port, b.Addr().(*net.TCPAddr).Port)
	return a, b, os.WriteFile(file, []byte(ports), 0o644)
}

func get(url string) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(url + ": " + resp.Status)
	}
	return nil
}
