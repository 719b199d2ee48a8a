package capo_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// Each flavor through the real binary: every variable filled, the manifest lints clean with
// the strict API and CLC checks, and carries what makes it that flavor.
func TestManifestsFlavors(t *testing.T) {
	dir := t.TempDir()
	sample := map[string]string{"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "2", "OPENSTACK_DNS_NAMESERVERS": "192.0.2.53",
		"OPENSTACK_EXTERNAL_NETWORK_ID": "00000000-0000-0000-0000-000000000000", "OPENSTACK_CLOUD_YAML_B64": "c2FtcGxl", "OPENSTACK_CLOUD_CACERT_B64": "c2FtcGxl",
		capo.VarSysextSHA512: strings.Repeat("5e", 64)}
	for _, flavor := range capo.FlavorNames() {
		t.Run(flavor, func(t *testing.T) {
			var list struct {
				Flavor    string   `json:"flavor"`
				Variables []string `json:"variables"`
			}
			r := testutil.Run(t, "manifests", "--flavor", flavor, "-o", "json").MustSucceed(t)
			if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || list.Flavor != flavor {
				t.Fatalf("-o json: %v %s", err, r.Stdout)
			}
			args := []string{"manifests", "--flavor", flavor, "--cluster-name", "demo", "--kubernetes-version", "v1.33.4", "--image-name", "flatcar-stable-4459.2.0"}
			for _, v := range list.Variables {
				switch v {
				case capo.VarClusterName, capo.VarKubernetesVersion, capo.VarImageName, capo.VarSysextURL:
					continue
				}
				val, ok := sample[v]
				if !ok {
					val = "sample"
				}
				args = append(args, "--set", v+"="+val)
			}
			if flavor == capo.FlavorSysext {
				args = append(args, "--sysext-url", "http://10.0.0.5:8080/ext/")
			}
			out := filepath.Join(dir, flavor+".yaml")
			r = testutil.Run(t, append(args, "--output-file", out)...).MustSucceed(t)
			if !strings.Contains(r.Stderr, "Flavor "+flavor+".") || !strings.Contains(r.Stderr, "Every variable is set") {
				t.Errorf("summary:\n%s", r.Stderr)
			}
			lint := testutil.Run(t, "lint", out).MustSucceed(t)
			if !strings.Contains(lint.Stdout, "0 error(s), 0 warning(s)") {
				t.Errorf("lint:\n%s", lint.Stdout)
			}
			m := testutil.Run(t, args...).MustSucceed(t).Stdout
			has := func(s string) bool { return strings.Contains(m, s) }
			switch flavor {
			case capo.FlavorBaked:
				if has("mask: true") || has("/etc/extensions") {
					t.Error("the baked flavor masks units or links a sysext")
				}
			case capo.FlavorSysextBaked:
				if !has("name: locksmithd.service\n              mask: true") || has("remote:") {
					t.Errorf("sysext-baked:\n%s", m)
				}
			case capo.FlavorSysext:
				if strings.Count(m, "url: http://10.0.0.5:8080/ext/kubernetes-v1.33.4-x86-64.raw") != 2 ||
					!has("path: /etc/extensions/kubernetes.raw") || !has("target: /opt/extensions/kubernetes/kubernetes-v1.33.4-x86-64.raw") {
					t.Errorf("sysext:\n%s", m)
				}
			}
		})
	}
	testutil.Run(t, "manifests", "--flavor", "packer").MustFail(t, 2, "unknown flavor", "baked, sysext-baked, sysext")
	testutil.Run(t, "manifests", "--sysext-url", "http://x").MustFail(t, 2, "--sysext-url is for --flavor sysext")
	testutil.Run(t, "manifests", "--flavor", "sysext", "--sysext-url", "10.0.0.5/ext").MustFail(t, 2, "want the http(s) URL")
}
