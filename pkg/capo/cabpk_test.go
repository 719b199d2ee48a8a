package capo_test

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// TestCABPKRendersTheControlPlane applies the default `manifests --capi-api v1beta2` output to
// the real management side (CAPI v1.12.10, CAPO's tested pairing), plays CAPO for the
// OpenStackCluster and reads the control plane's bootstrap data Secret the real CABPK writes:
// Ignition 2.3 with kubeadm init of our ClusterConfiguration, the cluster's CAs, and our
// additionalConfig (kubeadm.service after containerd) appended.
func TestCABPKRendersTheControlPlane(t *testing.T) {
	m := capitest.Start(t, capitest.Options{Pairing: capitest.Pairings[0], InfrastructureCRDs: true,
		Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane}})
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	testutil.Run(t, append([]string{"manifests", "--flavor", "sysext-baked", "--capi-api", "v1beta2", "--image-name", "img", "--output-file", file},
		capitest.ManifestSets("proof", "v1.34.4")...)...).MustSucceed(t)
	extra := capitest.Additions{Files: map[string]string{"/etc/cni/net.d/10-bridge.conflist": "{}"}, Users: []capitest.User{{Name: "checker", SSHKey: "ssh-ed25519 AAAA test", Groups: "sudo"}}}
	if err := capitest.AddToSpecs(file, extra, extra); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w := m.CreateCluster(t, file, "10.0.2.15:6443")
	cp := w.BootstrapData(t, true, 3*time.Minute)
	t.Logf("the control plane's bootstrap data %.1f s after the cluster was applied", time.Since(start).Seconds())
	if cp.Format != "ignition" {
		t.Fatalf("bootstrap data format %q, want ignition", cp.Format)
	}
	var cfg struct {
		Ignition struct{ Version string }
		Storage  struct {
			Files []struct {
				Path     string
				Contents struct{ Source string }
			}
		}
		Passwd  struct{ Users []struct{ Name string } }
		Systemd struct {
			Units []struct {
				Name    string
				Enabled *bool
				Dropins []struct{ Name, Contents string }
			}
		}
	}
	if err := json.Unmarshal(cp.UserData, &cfg); err != nil {
		t.Fatalf("the bootstrap data is not Ignition JSON: %v\n%s", err, cp.UserData)
	}
	files := map[string]string{}
	for _, f := range cfg.Storage.Files {
		s, _ := url.PathUnescape(strings.TrimPrefix(f.Contents.Source, "data:,"))
		files[f.Path] = s
	}
	yml, sh := files["/etc/kubeadm.yml"], files["/etc/kubeadm.sh"]
	// kubeadm v1beta4 timeouts from CAPI's *Seconds (slow clouds); controller-manager's
	// flex-volume dir off read-only /usr, where kubelet's is (else its pod cannot start).
	for _, want := range []string{"kind: InitConfiguration", "controlPlaneEndpoint: 10.0.2.15:6443", "kubernetesVersion: v1.34.4", "podSubnet: 192.168.0.0/16",
		"controlPlaneComponentHealthCheck: 20m0s", "value: " + node.VolumePluginDir, "${COREOS_OPENSTACK_HOSTNAME}"} {
		if !strings.Contains(yml, want) {
			t.Errorf("the control plane's kubeadm.yml lacks %q:\n%s", want, yml)
		}
	}
	if strings.Contains(yml, "$${") || !strings.Contains(sh, "kubeadm init --config /etc/kubeadm.yml") || !strings.Contains(sh, "envsubst") {
		t.Errorf("kubeadm.yml/kubeadm.sh:\n%s\n%s", yml, sh)
	}
	if !strings.Contains(files["/etc/kubernetes/pki/ca.crt"], "BEGIN CERTIFICATE") || !strings.Contains(files["/etc/kubernetes/pki/sa.key"], "PRIVATE KEY") {
		t.Errorf("no cluster CA or service-account key on the control plane: %v", keys(files))
	}
	// CABPK writes a file's content as a CLC block scalar: a newline ends it.
	if files["/etc/cni/net.d/10-bridge.conflist"] != "{}\n" || len(cfg.Passwd.Users) != 1 || cfg.Passwd.Users[0].Name != "checker" {
		t.Errorf("the user's file or login: %q %+v", files["/etc/cni/net.d/10-bridge.conflist"], cfg.Passwd.Users)
	}
	dropin := false
	for _, u := range cfg.Systemd.Units {
		for _, d := range u.Dropins {
			dropin = dropin || u.Name == "kubeadm.service" && strings.Contains(d.Contents, "After=containerd.service")
		}
	}
	if !dropin || !strings.HasPrefix(cfg.Ignition.Version, "2.") {
		t.Errorf("Ignition %q; the additionalConfig's kubeadm.service drop-in is not in it: %+v", cfg.Ignition.Version, cfg.Systemd.Units)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}
