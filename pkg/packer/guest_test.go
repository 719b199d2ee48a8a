//go:build guest

// A full Packer build of the stand-in guest with pkg/packer alone, then a boot of the result.
// `flatcar-capo build`'s end-to-end test (pkg/imagebuild) already builds and boots with both packers,
// so this one is a separate target, `make test-packer-guest`, for work on packer/ and pkg/packer.

package packer

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// standinPayload is a payload of small stand-in executables in the real layout.
func standinPayload(t *testing.T, dir string) {
	t.Helper()
	for _, b := range []string{"kubeadm", "kubelet", "kubectl"} {
		p := filepath.Join(dir, "bin", b)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho \"stand-in "+b+" v1.33.4\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tgz := func(name string, files ...string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		zw := gzip.NewWriter(f)
		tw := tar.NewWriter(zw)
		for _, n := range files {
			body := "#!/bin/sh\necho " + n + "\n"
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(body)), Uid: 1000, Gid: 1000})
			tw.Write([]byte(body))
		}
		tw.Close()
		zw.Close()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tgz("crictl.tar.gz", "crictl")
	tgz("cni-plugins.tgz", "./bridge", "./host-local", "./loopback")
	os.WriteFile(filepath.Join(dir, "versions.env"), []byte("KUBERNETES_VERSION=v1.33.4\nCRICTL_VERSION=v1.33.0\nCNI_PLUGINS_VERSION=v1.7.1\n"), 0o644)
	cmd := exec.Command("sh", "-c", "sha256sum bin/* crictl.tar.gz cni-plugins.tgz versions.env > SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum: %v\n%s", err, out)
	}
}

// buildStandin runs one real packer build of the stand-in guest with packer (""=PATH) and
// returns the output image.
func buildStandin(t *testing.T, packer string) Result {
	t.Helper()
	testutil.RequireTools(t, "packer", "qemu-system-x86_64", "qemu-img", "cp")
	src := standin.Image(t, standin.Options{})
	dir := t.TempDir()
	base := filepath.Join(dir, "base.img")
	if out, err := exec.Command("cp", "--sparse=always", src, base).CombinedOutput(); err != nil {
		t.Fatalf("copying the stand-in: %v\n%s", err, out)
	}
	os.Chmod(base, 0o644)
	ign, key, err := standin.NewUser(dir, "capo-build")
	if err != nil {
		t.Fatal(err)
	}
	ignFile := filepath.Join(dir, "config.ign")
	os.WriteFile(ignFile, ign, 0o600)
	standinPayload(t, filepath.Join(dir, "payload"))
	user := filepath.Join(dir, "user.sh")
	os.WriteFile(user, []byte("#!/bin/sh\nset -e\necho user-script-ran > /etc/flatcar-capo-user-script\n"), 0o755)

	start := time.Now()
	res, err := Build(context.Background(), Config{
		Packer: packer, CPUs: 2, MemoryMiB: 1024,
		BaseImage: base, OutputDir: filepath.Join(dir, "out"), OutputName: "flatcar.img",
		WorkDir: filepath.Join(dir, "work"), SSHUser: "capo-build", SSHPrivateKeyFile: key,
		IgnitionFile: ignFile, Payload: filepath.Join(dir, "payload"),
		Vars:        map[string]string{"KUBERNETES_VERSION": "v1.33.4"},
		UserScripts: []string{user},
		Log:         t.Output(),
	})
	if err != nil {
		serial, _ := os.ReadFile(filepath.Join(dir, "work", "serial.log"))
		t.Fatalf("Build: %v\nserial log tail:\n%s", err, tail(string(serial), 3000))
	}
	t.Logf("packer %s build of the stand-in (%s): %s", res.PackerVersion, res.Accelerator, time.Since(start).Round(time.Millisecond))
	if b, _ := os.ReadFile(filepath.Join(dir, "work", "serial.log")); !strings.Contains(string(b), "flatcar-capo sysprep: removed the build user capo-build") {
		t.Errorf("the build VM's console does not show the build user's removal at shutdown")
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "work", "serial.log"))
			kept := filepath.Join(os.TempDir(), "packer-"+strings.ReplaceAll(t.Name(), "/", "_")+"-build-serial.log")
			os.WriteFile(kept, b, 0o644)
			t.Logf("build VM serial log kept in %s", kept)
		}
	})
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// The provisioning and sysprep scripts run for real in a systemd guest, and the image they leave
// behind boots as a fresh machine: Kubernetes installed and enabled, units ordered, no build
// user, a new machine-id and host keys, updates masked, Ignition re-armed (it ran again).
func TestBuildStandinAndBootResult(t *testing.T) {
	testutil.SkipLong(t, "boots two QEMU TCG VMs")
	// FLATCAR_CAPO_PACKER (as the CLI reads it) picks another packer, e.g. the 1.12 one.
	res := buildStandin(t, os.Getenv("FLATCAR_CAPO_PACKER"))
	ign, key, err := standin.NewUser(t.TempDir(), "checker")
	if err != nil {
		t.Fatal(err)
	}
	g := standin.Boot(t, res.Image, standin.BootOptions{Ignition: ign, User: "checker", Key: key})
	for cmd, want := range map[string]string{
		"/opt/bin/kubeadm": "stand-in kubeadm v1.33.4",
		"stat -c %a /opt/bin/kubelet /opt/bin/crictl":                           "755\n755",
		"ls /opt/cni/bin | tr '\\n' ' '":                                        "bridge host-local loopback ",
		"stat -c %U /opt/cni/bin/bridge":                                        "root",
		"systemctl is-enabled kubelet.service":                                  "enabled",
		"systemctl show -p After --value kubeadm.service":                       "containerd.service",
		"systemctl show -p Environment --value containerd":                      "CONTAINERD_CONFIG=/etc/containerd/config.toml",
		"grep -c 'SystemdCgroup = true' /etc/containerd/config.toml":            "1",
		"systemctl is-enabled update-engine.service locksmithd.service || true": "masked\nmasked",
		"id capo-build 2>&1 || true":                                            "no such user",
		"test ! -e /home/capo-build && echo gone":                               "gone",
		"grep -c capo-build /oem/config.ign 2>/dev/null || echo 0":              "0", // sysprep removes a leftover one
		"test ! -e " + guestPayloadDir + " && echo gone":                        "gone",
		"cat /etc/flatcar-capo-user-script":                                     "user-script-ran",
	} {
		out, err := g.SSH(cmd)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %q (%v), want %q", cmd, out, err, want)
		}
	}
	// None of the units the build touched failed (the guest's own may: binfmt has no module here).
	out, err := g.SSH("systemctl list-units --failed --no-legend --plain | cut -d' ' -f1")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range strings.Fields(out) {
		if strings.HasPrefix(u, "kube") || strings.HasPrefix(u, "containerd") || strings.Contains(u, "flatcar-capo") || strings.HasPrefix(u, "ssh") {
			t.Errorf("unit %s failed on the first boot of the built image", u)
		}
	}
}
