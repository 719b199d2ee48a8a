package standin

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
)

// TestCABPKIgnitionOnConfigDrive boots the openstack guest with the control plane's bootstrap
// data the real CABPK (capitest's management side) renders for `flatcar-capo manifests` (Ignition spec 2.3: files, users, kubeadm.service with
// its drop-in) on a config-2 drive, as Nova hands it over, and checks that the guest's Ignition
// applied every file with its content and mode, the unit, its drop-in and its enablement, and
// that coreos-metadata read the drive's meta_data.json as afterburn does.
func TestCABPKIgnitionOnConfigDrive(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64")
	img := CopyImage(t, Image(t, Options{OEM: "openstack"}))
	manifest := filepath.Join(t.TempDir(), "cluster.yaml")
	testutil.Run(t, append([]string{"manifests", "--flavor", "sysext-baked", "--capi-api", "v1beta2", "--image-name", "flatcar-stable", "--output-file", manifest},
		capitest.ManifestSets("standin", "v1.34.4")...)...).MustSucceed(t)
	_, key := TestUser(t)
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	add := capitest.Additions{Files: map[string]string{"/etc/flatcar-capo-test/extra.conf": "a=1\n"},
		Users: []capitest.User{{Name: TestUserName, SSHKey: strings.TrimSpace(string(pub)), Groups: "sudo"}}}
	if err := capitest.AddToSpecs(manifest, add, capitest.Additions{}); err != nil {
		t.Fatal(err)
	}
	// The real CABPK renders it: the control plane's Secret (a worker's waits for a control plane
	// that answers, which this guest does not run).
	m := capitest.Start(t, capitest.Options{Pairing: capitest.Pairings[0], InfrastructureCRDs: true,
		Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane}})
	ign := m.CreateCluster(t, manifest, "10.0.2.15:6443").BootstrapData(t, true, 5*time.Minute).UserData
	var cfg struct {
		Ignition struct{ Version string }
		Storage  struct {
			Files []struct {
				Path     string
				Mode     int
				Contents struct{ Source string }
			}
		}
		Systemd struct {
			Units []struct {
				Name    string
				Enabled *bool
				Dropins []struct{ Name, Contents string }
			}
		}
	}
	if err := json.Unmarshal(ign, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Ignition.Version != "2.3.0" || len(cfg.Storage.Files) < 3 {
		t.Fatalf("CABPK's config is spec %q with %d files, want 2.3.0 with kubeadm.yml, the CAs and ours", cfg.Ignition.Version, len(cfg.Storage.Files))
	}
	drive := filepath.Join(t.TempDir(), "config-2.iso")
	uuid := "6f1d2c3e-0000-4000-8000-0000000000c1"
	if err := configdrive.Write(drive, ign, configdrive.MetaData{UUID: uuid, Name: "standin-control-plane-0", Hostname: "standin-control-plane-0.novalocal"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	g := Boot(t, img, BootOptions{ConfigDrive: drive, Key: key})
	t.Logf("boot with CABPK's Ignition on config-2: %.1fs to SSH", time.Since(start).Seconds())

	// Every file: content (sha256) and mode as the config says. kubeadm.service (enabled by
	// Ignition's preset, after coreos-metadata) runs the template's preKubeadmCommands first:
	// envsubst rewrites /etc/kubeadm.yml with the drive's hostname and UUID (kubeadm init then
	// fails here, no Kubernetes in this guest, and leaves it), keeping the config's 0600 (it holds the token).
	must(t, g, "sudo systemctl start kubeadm.service || true")
	var want, cmd strings.Builder
	for _, f := range cfg.Storage.Files {
		data, err := dataURL(f.Contents.Source)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		mode, stat := fmt.Sprintf("%o", f.Mode), fmt.Sprintf("$(sudo stat -c %%a %s)", f.Path)
		if f.Path == "/etc/kubeadm.yml" {
			data = []byte(strings.NewReplacer("${COREOS_OPENSTACK_HOSTNAME}", "standin-control-plane-0",
				"${COREOS_OPENSTACK_INSTANCE_UUID}", uuid).Replace(string(data)))
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&want, "%s %s\n", hex.EncodeToString(sum[:]), mode)
		fmt.Fprintf(&cmd, "echo $(sudo sha256sum %s | cut -d' ' -f1) %s;", f.Path, stat)
	}
	if got := must(t, g, cmd.String()); got != strings.TrimSpace(want.String()) {
		t.Errorf("files (sha256 mode) in the guest:\n%s\nwant:\n%s", got, want.String())
	}
	for _, u := range cfg.Systemd.Units {
		if u.Enabled != nil && *u.Enabled && !strings.Contains(u.Name, "@.") {
			if got, _ := g.SSH("systemctl is-enabled " + u.Name); strings.TrimSpace(got) != "enabled" {
				t.Errorf("%s is %q, want enabled (Ignition's preset)", u.Name, strings.TrimSpace(got))
			}
		}
		for _, d := range u.Dropins {
			p := "/etc/systemd/system/" + u.Name + ".d/" + d.Name
			wantContains(t, u.Name+" drop-ins", must(t, g, "systemctl show -p DropInPaths --value "+u.Name), p)
			if got := must(t, g, "cat "+p); got != strings.TrimSpace(d.Contents) {
				t.Errorf("%s:\n%s\nwant:\n%s", p, got, d.Contents)
			}
		}
	}
	if got := must(t, g, "systemctl show -p FragmentPath --value kubeadm.service"); got != "/etc/systemd/system/kubeadm.service" {
		t.Errorf("kubeadm.service comes from %q, want CABPK's in /etc/systemd/system", got)
	}
	wantContains(t, "id", must(t, g, "id"), "("+TestUserName+")", "(sudo)")
	// The real Ignition did it, in the initramfs, from the config drive.
	log := must(t, g, "cat /run/ignition.log")
	wantContains(t, "/run/ignition.log", log, "Ignition v2.24.0", "mounting config drive", ignitionParsed(ign),
		`writing file "/sysroot/etc/kubeadm.yml"`, `setting preset to enabled for "kubeadm.service"`)
	// kubeadm.service's drop-in pulls in coreos-metadata, which reads the drive as afterburn does.
	must(t, g, "sudo systemctl start coreos-metadata.service")
	if got := must(t, g, "cat /run/metadata/flatcar | sort"); got != "COREOS_OPENSTACK_HOSTNAME=standin-control-plane-0.novalocal\nCOREOS_OPENSTACK_INSTANCE_UUID="+uuid {
		t.Errorf("/run/metadata/flatcar:\n%s", got)
	}
}

// ignitionParsed is the line Ignition logs when it parses exactly config.
func ignitionParsed(config []byte) string {
	sum := sha512.Sum512(config)
	return "parsing config with SHA512: " + hex.EncodeToString(sum[:])
}

// dataURL decodes a data: URL as Ignition does (base64 or percent-encoded).
func dataURL(u string) ([]byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasPrefix(u, "data:") {
		return nil, fmt.Errorf("not a data: URL: %.40s", u)
	}
	if strings.HasSuffix(meta, ";base64") {
		return base64.StdEncoding.DecodeString(data)
	}
	s, err := url.PathUnescape(data)
	return []byte(s), err
}
