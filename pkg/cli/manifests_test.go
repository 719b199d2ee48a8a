package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

func TestManifestsCommand(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-name", "flatcar-stable-4459.2.0").MustSucceed(t)
	// CAPI v1beta2 by default (CAPO v0.14 needs CAPI 1.12+); v1beta1 on request.
	if !strings.Contains(r.Stdout, "apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\n") || strings.Contains(r.Stdout, "cluster.x-k8s.io/v1beta1\nkind: Cluster\n") {
		t.Fatalf("default is not CAPI v1beta2:\n%s", r.Stdout)
	}
	old := testutil.Run(t, "manifests", "--capi-api", "v1beta1").MustSucceed(t)
	if !strings.Contains(old.Stdout, "apiVersion: controlplane.cluster.x-k8s.io/v1beta1\nkind: KubeadmControlPlane\n") {
		t.Fatalf("--capi-api v1beta1:\n%s", old.Stdout)
	}
	// v1beta1's end is announced: the choice warns and names the fix; the default does not.
	if !strings.Contains(old.Stderr, "warning: CAPI v1.16 stops serving the v1beta1 API") || !strings.Contains(old.Stderr, "use --capi-api v1beta2") ||
		strings.Contains(old.Stdout, "v1.16") || strings.Contains(r.Stderr, "v1beta1") {
		t.Fatalf("--capi-api v1beta1 stderr:\n%s\ndefault stderr:\n%s", old.Stderr, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "name: flatcar-stable-4459.2.0") || !strings.Contains(r.Stdout, "$${COREOS_OPENSTACK_HOSTNAME}") ||
		!strings.Contains(r.Stdout, "${CLUSTER_NAME}") {
		t.Fatalf("template not rendered as a clusterctl template:\n%s", r.Stdout)
	}
	for _, want := range []string{"Validated 8 documents", "User-data estimate: KubeadmControlPlane", "Still to set", "CLUSTER_NAME"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}

	out := filepath.Join(t.TempDir(), "cluster.yaml")
	r = testutil.Run(t, "manifests", "--cluster-name", "demo", "--kubernetes-version", "1.33.4",
		"--output-file", out, "-o", "json").MustSucceed(t)
	var rep struct {
		OutputFile string   `json:"outputFile"`
		Missing    []string `json:"missing"`
		Manifest   string   `json:"manifest"`
		UserData   []struct{ Bytes, Limit int }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.Stdout)
	}
	if rep.OutputFile != out || rep.Manifest != "" || len(rep.UserData) != 2 || rep.UserData[0].Bytes == 0 || rep.UserData[0].Limit != 65535 {
		t.Fatalf("report %+v", rep)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600 (it may hold clouds.yaml)", out, fi.Mode().Perm())
	}
	if !strings.Contains(string(data), "cluster.x-k8s.io/v1beta2") || !strings.Contains(string(data), "version: v1.33.4") ||
		!strings.Contains(string(data), "name: demo-md-0") {
		t.Fatalf("output file not filled for v1beta2:\n%s", data)
	}

	testutil.Run(t, "manifests", "--set", "WORKER_MACHINE_COUNT").MustFail(t, 2, "is not VAR=value")
	testutil.Run(t, "manifests", "--set", "NOPE=1").MustFail(t, 2, "has no variable NOPE")
	testutil.Run(t, "manifests", "--set", "WORKER_MACHINE_COUNT=many").MustFail(t, 2, "--set WORKER_MACHINE_COUNT", "a whole number")
	testutil.Run(t, "manifests", "--capi-api", "v1alpha4").MustFail(t, 2, "v1beta2")
	testutil.Run(t, "manifests", "--image-name", "").MustFail(t, 2, "must not be empty")
}

// --image-ref and --image-source as users type them: the ORC Image is in the output and
// validated; what cannot work is a usage error naming the missing piece.
func TestManifestsImageRefFlags(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-ref", "orc", "--image-name", "flatcar-stable-4459.2.0").MustSucceed(t)
	if !strings.Contains(r.Stdout, "kind: Image") || !strings.Contains(r.Stdout, "imageRef:") || !strings.Contains(r.Stderr, "Validated 9 documents") {
		t.Errorf("--image-ref orc:\n%s\n%s", r.Stdout, r.Stderr)
	}
	sum := strings.Repeat("0f", 64)
	r = testutil.Run(t, "manifests", "--image-source", "https://images.example/flatcar.qcow2", "--image-sha512", sum).MustSucceed(t)
	if !strings.Contains(r.Stdout, "managementPolicy: managed") || !strings.Contains(r.Stdout, "value: "+sum) {
		t.Errorf("--image-source:\n%s", r.Stdout)
	}
	testutil.Run(t, "manifests", "--image-source", "https://images.example/flatcar.qcow2").MustFail(t, 2, "sha512", "--from-record")
	testutil.Run(t, "manifests", "--image-ref", "id").MustFail(t, 2, "--image-id")
	testutil.Run(t, "manifests", "--image-id", "x").MustFail(t, 2, "--image-ref id or orc")
	testutil.Run(t, "manifests", "--image-ref", "glance").MustFail(t, 2, "invalid --image-ref")
	testutil.Run(t, "manifests", "--from-record", "/nonexistent.build.json").MustFail(t, 2, "--from-record")
}

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
			if !strings.Contains(r.Stderr, "Flavor "+flavor+".") || !strings.Contains(r.Stderr, "Every variable is set") ||
				!strings.Contains(r.Stderr, capo.GateIgnition+" clusterctl init") || strings.Contains(r.Stderr, capo.GateTopology) {
				t.Errorf("summary (want the clusterctl init with the Ignition gate only):\n%s", r.Stderr)
			}
			lint := testutil.Run(t, "lint", out).MustSucceed(t)
			if !strings.Contains(lint.Stdout, "0 error(s), 0 warning(s)") {
				t.Errorf("lint:\n%s", lint.Stdout)
			}
			m := testutil.Run(t, args...).MustSucceed(t).Stdout
			has := func(s string) bool { return strings.Contains(m, s) }
			switch flavor {
			case capo.FlavorBaked:
				// Only systemd-sysupdate.timer is masked (every flavor masks it): the updates stay on.
				if strings.Count(m, "mask: true") != 2 || !has("name: systemd-sysupdate.timer\n") || has("name: locksmithd.service") || has("/etc/extensions") {
					t.Error("the baked flavor masks units besides systemd-sysupdate.timer or links a sysext")
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

// manifests --image-repository sets kubeadm's imageRepository in the control plane's
// clusterConfiguration, the names `build --image-repository` preloaded; a bad value is exit 2.
func TestManifestsImageRepository(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-name", "img", "--kubernetes-version", "v1.33.4", "--image-repository", "registry.example:5000/k8s").MustSucceed(t)
	i := strings.Index(r.Stdout, "clusterConfiguration:\n")
	if i < 0 || !strings.HasPrefix(strings.TrimLeft(r.Stdout[i+len("clusterConfiguration:\n"):], " "), "imageRepository: registry.example:5000/k8s\n") {
		t.Fatalf("no imageRepository under clusterConfiguration:\n%s", r.Stdout)
	}
	if strings.Count(r.Stdout, "imageRepository:") != strings.Count(r.Stdout, "clusterConfiguration:") {
		t.Error("not every clusterConfiguration got the imageRepository")
	}
	testutil.Run(t, "manifests", "--image-name", "img", "--kubernetes-version", "v1.33.4", "--image-repository", "https://registry.example/k8s").MustFail(t, 2, "--image-repository")
}

func TestLintCommand(t *testing.T) {
	seed := testutil.Testdata("seed", "capo-flatcar-issue.yaml")
	r := testutil.Run(t, "lint", seed).MustFail(t, 1, "[node-name-metadata]", "fix:", "4 error(s), 6 warning(s)", "line 9, column 7",
		"warning [clc-warning]", "mode unspecified for file, defaulting to 0644")
	if !strings.Contains(r.Stdout, "capo-flatcar-issue.yaml:184: error [node-name-metadata] KubeadmConfigTemplate org-giantswarm/galaxy-galaxy-flatcar-lon-1") {
		t.Fatalf("finding not located by file, line, document:\n%s", r.Stdout)
	}

	r = testutil.Run(t, "lint", "-o", "json", seed)
	var rep capo.LintReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || r.Code != 1 {
		t.Fatalf("exit %d, -o json: %v\n%s", r.Code, err, r.Stdout)
	}
	if rep.Errors != 4 || rep.Warnings != 6 || rep.Documents != 3 || rep.CAPIVersion != capo.NewestCAPIVersion {
		t.Fatalf("report %+v", rep)
	}

	good, _ := os.ReadFile(testutil.Testdata("lint", "good.yaml"))
	r = testutil.RunCmd(t, testutil.Cmd{Args: []string{"lint", "-"}, Stdin: string(good)}).MustSucceed(t)
	if !strings.Contains(r.Stdout, "8 document(s) checked for CAPI 1.14.2: 0 error(s), 0 warning(s)") {
		t.Fatalf("stdin lint: %s", r.Stdout)
	}
	// Warnings alone do not fail CI.
	testutil.Run(t, "lint", testutil.Testdata("lint", "unknown-field.yaml")).MustSucceed(t)
	// Several files: an old and a new state of one KubeadmControlPlane.
	testutil.Run(t, "lint", "--capi-version", "v1.3.5", testutil.Testdata("lint", "format-change.yaml")).
		MustFail(t, 1, "[format-immutable]", "CAPI 1.3.5 refuses")
	testutil.Run(t, "lint", "--capi-version", "1.3.6", testutil.Testdata("lint", "format-change.yaml")).MustSucceed(t)

	// A template in the shape of CAPO's sysext flavors (defaults, % operators, a file without
	// mode) passes with the transpiler's warning kept a warning; CAPO v0.15's infrastructure
	// v1beta2 document is reported as unchecked, not counted as clean.
	r = testutil.Run(t, "lint", testutil.Testdata("lint", "clusterctl-variables.yaml")).MustSucceed(t)
	for _, want := range []string{"0 error(s), 2 warning(s)", "warning [clc-warning]", "defaulting to 0644",
		"warning [api-version-unchecked]", "apiVersion infrastructure.cluster.x-k8s.io/v1beta2"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("lint of the upstream-shaped template: no %q in\n%s", want, r.Stdout)
		}
	}
	// The values its defaults give are checked; what envsubst refuses is an error.
	testutil.Run(t, "lint", testutil.Testdata("lint", "clusterctl-variables-bad.yaml")).MustFail(t, 1,
		"[clusterctl-variable]", "${CLUSTER_NAME-workers}: missing closing brace", "`maybe` into bool",
		"the value comes from ${LOCKSMITHD_MASK}, which has no default")

	testutil.Run(t, "lint").MustFail(t, 2, "FILE")
	testutil.Run(t, "lint", "--capi-version", "latest", seed).MustFail(t, 2, "--capi-version")
	testutil.Run(t, "lint", "--capi-version", "1.15", seed).MustFail(t, 2, "--capi-version", "CAPI 1.15 is newer", "--capi-version 1.14")
	// CAPI's own webhooks, without a cluster: the v1beta2 template of 8eeba9d sets KCP's init
	// timeout without the join one, which KCP's webhook refuses; a path written twice, CABPK's.
	testutil.Run(t, "lint", testutil.Testdata("lint", "capi-validation.yaml")).MustFail(t, 1, "[capi-validation]",
		"spec.kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds",
		"controlPlaneComponentHealthCheckSeconds must be set to the same value both in initConfiguration.timeouts (1200) and in joinConfiguration.timeouts (unset)",
		"spec.template.spec.files[1].path", "path property must be unique among all files")
	// CAPI v1.14's fields are known (files[].contentFormat); on CAPI 1.12 and 1.13 that field is
	// unknown, and lint says so.
	for v, want := range map[string]string{"": "for CAPI 1.14.2: 0 error(s), 0 warning(s)", "1.14": "for CAPI 1.14.0: 0 error(s), 0 warning(s)",
		"1.13.4": "files[].contentFormat is new in CAPI 1.14: CAPI 1.13.4's API server refuses it", "1.12": "for CAPI 1.12.0: 0 error(s), 1 warning(s)"} {
		args := []string{"lint", testutil.Testdata("lint", "content-format.yaml")}
		if v != "" {
			args = append(args, "--capi-version", v)
		}
		if r = testutil.Run(t, args...).MustSucceed(t); !strings.Contains(r.Stdout, want) {
			t.Errorf("--capi-version %q, v1.14's contentFormat: no %q in\n%s", v, want, r.Stdout)
		}
	}
	// CABPK's own Ignition renderer refuses a file without permissions: the Machine never boots.
	testutil.Run(t, "lint", testutil.Testdata("lint", "cabpk-render.yaml")).MustFail(t, 1, "[cabpk-render]",
		"spec.template.spec.files[0]", "/etc/flatcar/update.conf has no permissions", `for example "0644"`)
	testutil.Run(t, "lint", filepath.Join(t.TempDir(), "missing.yaml")).MustFail(t, 1, "reading", "missing.yaml")
}
