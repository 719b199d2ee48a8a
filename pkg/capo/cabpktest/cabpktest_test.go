package cabpktest_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo/cabpktest"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// ManifestArgs render every variable, so the output is what a management cluster holds.
var manifestArgs = append([]string{"manifests", "--flavor", "sysext-baked", "--capi-api", "v1beta2", "--image-name", "img"}, cabpktest.ManifestSets("proof", "v1.34.4")...)

// TestIgnitionFromManifests renders the real command's KubeadmControlPlane and
// KubeadmConfigTemplate as CABPK would and reads the files and units a node gets.
func TestIgnitionFromManifests(t *testing.T) {
	manifest := testutil.Run(t, manifestArgs...).MustSucceed(t).Stdout
	c, err := cabpktest.NewCluster("10.0.2.15:6443")
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range []bool{true, false} {
		raw, err := c.Ignition(cabpktest.Node{Manifest: manifest, ControlPlane: cp, Users: []cabpktest.User{{Name: "checker", SSHKey: "ssh-ed25519 AAAA test"}},
			Files: map[string]string{"/etc/cni/net.d/10-bridge.conflist": "{}"}})
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Ignition struct{ Version string }
			Storage  struct {
				Files []struct {
					Path     string
					Contents struct{ Source string }
				}
			}
			Systemd struct {
				Units []struct {
					Name    string
					Enabled *bool
					Mask    bool
					Dropins []struct{ Name, Contents string }
				}
			}
			Passwd struct{ Users []struct{ Name string } }
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for _, f := range cfg.Storage.Files {
			s, _ := url.PathUnescape(strings.TrimPrefix(f.Contents.Source, "data:,"))
			files[f.Path] = s
		}
		yml := files["/etc/kubeadm.yml"]
		wantKind, wantCmd := "kind: JoinConfiguration", "kubeadm join --config /etc/kubeadm.yml"
		if cp {
			wantKind, wantCmd = "kind: InitConfiguration", "kubeadm init --config /etc/kubeadm.yml"
			// kubeadm v1beta4 timeouts from CAPI's *Seconds (slow clouds); controller-manager's
			// flex-volume dir off read-only /usr, where kubelet's is (else its pod cannot start).
			for _, want := range []string{"controlPlaneEndpoint: 10.0.2.15:6443", "kubernetesVersion: v1.34.4", "podSubnet: 192.168.0.0/16", "token: abcdef.0123456789abcdef",
				"controlPlaneComponentHealthCheck: 1200s", "kubeletHealthCheck: 1200s", "value: " + node.VolumePluginDir} {
				if !strings.Contains(yml, want) {
					t.Errorf("control plane kubeadm.yml lacks %q:\n%s", want, yml)
				}
			}
			if !strings.Contains(files["/etc/kubernetes/pki/ca.crt"], "BEGIN CERTIFICATE") || !strings.Contains(files["/etc/kubernetes/pki/sa.key"], "PRIVATE KEY") {
				t.Errorf("no cluster CA or service-account key on the control plane")
			}
		} else {
			hash, _ := c.CAHash()
			if !strings.Contains(yml, hash) || !strings.Contains(yml, "apiServerEndpoint: 10.0.2.15:6443") || !strings.Contains(yml, "tlsBootstrap: 1200s") {
				t.Errorf("join kubeadm.yml lacks the CA hash %s or the endpoint:\n%s", hash, yml)
			}
			if _, ok := files["/etc/kubernetes/pki/ca.key"]; ok {
				t.Errorf("a worker got the CA key")
			}
		}
		if !strings.Contains(yml, wantKind) || !strings.Contains(yml, "${COREOS_OPENSTACK_HOSTNAME}") || strings.Contains(yml, "$${") ||
			!strings.Contains(files["/etc/kubeadm.sh"], wantCmd) || !strings.Contains(files["/etc/kubeadm.sh"], "envsubst") {
			t.Errorf("kubeadm.yml/kubeadm.sh:\n%s\n%s", yml, files["/etc/kubeadm.sh"])
		}
		if files["/etc/cni/net.d/10-bridge.conflist"] != "{}" || len(cfg.Passwd.Users) != 1 || cfg.Ignition.Version != "2.3.0" {
			t.Errorf("extra file, users or version: %v %v %q", files["/etc/cni/net.d/10-bridge.conflist"], cfg.Passwd.Users, cfg.Ignition.Version)
		}
		dropin := false
		for _, u := range cfg.Systemd.Units {
			if u.Name == "kubeadm.service" {
				for _, d := range u.Dropins {
					dropin = dropin || strings.Contains(d.Contents, "After=containerd.service")
				}
			}
		}
		if !dropin {
			t.Errorf("the additionalConfig's kubeadm.service drop-in is not in the Ignition: %+v", cfg.Systemd.Units)
		}
	}
}
