package capo_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// admissionValues fill every variable the templates use, as a user's clusterctl or --set would
// (OPENSTACK_EXTERNAL_NETWORK_ID is a UUID: CAPO's CRD says so). A template growing a variable
// not here fails the test, rather than leaving a ${VAR} the API server would refuse.
var admissionValues = map[string]string{
	"CONTROL_PLANE_MACHINE_COUNT":            "1",
	"WORKER_MACHINE_COUNT":                   "2",
	"OPENSTACK_CLOUD":                        "openstack",
	"OPENSTACK_CLOUD_CACERT_B64":             base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")),
	"OPENSTACK_CLOUD_YAML_B64":               base64.StdEncoding.EncodeToString([]byte("clouds:\n  openstack:\n    auth: {auth_url: https://keystone.example:5000/v3}\n")),
	"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR": "m1.medium",
	"OPENSTACK_NODE_MACHINE_FLAVOR":          "m1.small",
	"OPENSTACK_DNS_NAMESERVERS":              "192.0.2.53",
	"OPENSTACK_EXTERNAL_NETWORK_ID":          "3f8b1b8e-5c1a-4b8e-9d0c-2a6f4e1d7c90",
	"OPENSTACK_FAILURE_DOMAIN":               "nova",
	"OPENSTACK_FLATCAR_IMAGE_NAME":           "flatcar-stable-4459.2.0-kube-v1.34.4",
	"OPENSTACK_SSH_KEY_NAME":                 "default",
}

// admissionCombos are the choices a user has in `manifests`, each rendered by the binary.
func admissionCombos(t *testing.T) [][]string {
	_, ca := fetchtest.NewTLSServer(t)
	imageID := "--image-id=7c2d9b4e-1f3a-4e5b-8c6d-0a1b2c3d4e5f"
	sysext := []string{"--flavor", "sysext", "--sysext-url", "https://mirror.example/ext", "--insecure-no-hash"}
	trust := []string{"--ca-file", ca, "--http-proxy", "http://proxy.example:3128", "--https-proxy", "http://proxy.example:3128",
		"--no-proxy", "10.0.0.0/8,.svc,.cluster.local"}
	var combos [][]string
	for _, api := range []string{"v1beta2", "v1beta1"} {
		for _, flavor := range [][]string{{"--flavor", "baked"}, {"--flavor", "sysext-baked"}, sysext} {
			combos = append(combos, append([]string{"--capi-api", api}, flavor...))
		}
		combos = append(combos,
			[]string{"--capi-api", api, "--api-server-load-balancer=false"},
			[]string{"--capi-api", api, "--image-ref", "id", imageID},
			[]string{"--capi-api", api, "--image-ref", "orc", imageID},
			append([]string{"--capi-api", api, "--image-source", "https://images.example/flatcar.qcow2", "--image-sha512", strings.Repeat("ab", 64)}, "--flavor", "sysext-baked"),
			append(append([]string{"--capi-api", api}, sysext...), append(trust, "--sysupdate-url", "https://mirror.example/ext")...),
			append([]string{"--capi-api", api, "--flavor", "sysext-baked", "--api-server-load-balancer=false", "--image-ref", "orc", imageID}, trust...))
	}
	for _, flavor := range []string{"baked", "sysext-baked"} {
		combos = append(combos, []string{"--clusterclass", "--flavor", flavor},
			append([]string{"--clusterclass", "--flavor", flavor, "--api-server-load-balancer=false"}, trust...))
	}
	return combos
}

type renderedCombo struct {
	args     []string
	ns, file string
}

// Every choice `manifests` offers is applied for real and admitted by the real management side
// of both pairings users run (CAPI's and CAPO's CRD schemas, admission and conversion webhooks,
// the feature gates clusterctl init sets), and every object reads back at every API version its
// CRD serves, through the providers' conversion webhooks.
func TestManifestsAdmittedByCAPI(t *testing.T) {
	testutil.RequireReal(t, "kube-apiserver with the CAPI and CAPO managers")
	dir := t.TempDir()
	var rendered []renderedCombo
	start := time.Now()
	for i, args := range admissionCombos(t) {
		name := fmt.Sprintf("c%02d", i)
		rendered = append(rendered, renderedCombo{args: args, ns: name, file: renderAdmission(t, dir, name, args)})
	}
	t.Logf("rendered %d combinations in %s", len(rendered), time.Since(start).Round(time.Millisecond))
	for _, p := range capitest.Pairings {
		t.Run(p.String(), func(t *testing.T) {
			m := capitest.Start(t, capitest.Options{Pairing: p})
			start := time.Now()
			applied := map[string][]string{} // CRD resource name -> namespace/name applied
			for _, c := range rendered {
				applyAdmission(t, m, c, applied)
			}
			t.Logf("%s: %d combinations admitted in %s", p, len(rendered), time.Since(start).Round(10*time.Millisecond))
			start = time.Now()
			n := readBackAdmission(t, m, applied)
			t.Logf("%s: %d objects read back at every served version in %s", p, n, time.Since(start).Round(10*time.Millisecond))
		})
	}
}

// renderAdmission runs `flatcar-capo manifests args` with every variable set, into dir/name.yaml.
func renderAdmission(t *testing.T, dir, name string, args []string) string {
	t.Helper()
	args = append([]string{"manifests", "--cluster-name", name, "--kubernetes-version", "v1.34.4"}, args...)
	var res struct{ Missing []string }
	r := testutil.Run(t, append(args, "-o", "json")...).MustSucceed(t)
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("manifests -o json: %v", err)
	}
	for _, v := range res.Missing {
		val, ok := admissionValues[v]
		if !ok {
			t.Fatalf("flatcar-capo %s: the template has a variable %s that admissionValues does not fill", strings.Join(args, " "), v)
		}
		args = append(args, "--set", v+"="+val)
	}
	out := filepath.Join(dir, name+".yaml")
	testutil.Run(t, append(args, "--output-file", out)...).MustSucceed(t)
	return out
}

var docSplit = regexp.MustCompile(`(?m)^---[ \t]*$\n?`)

// applyAdmission applies one rendered manifest in its own namespace: first everything but the
// Clusters with a topology, then those once their ClusterClass is reconciled (the Cluster's
// webhook checks its variables against the class's status).
func applyAdmission(t *testing.T, m *capitest.Management, c renderedCombo, applied map[string][]string) {
	t.Helper()
	b, err := os.ReadFile(c.file)
	if err != nil {
		t.Fatal(err)
	}
	var rest, topology []string
	for _, d := range docSplit.Split(string(b), -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		if strings.Contains(d, "\nkind: Cluster\n") && strings.Contains(d, "\n  topology:") {
			topology = append(topology, d)
		} else {
			rest = append(rest, d)
		}
	}
	if out, err := m.Kubectl("create", "namespace", c.ns); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	apply := func(file string, docs []string) (string, error) {
		f := filepath.Join(filepath.Dir(c.file), file)
		if err := os.WriteFile(f, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		return m.Kubectl("apply", "--server-side", "--field-manager", "flatcar-capo-test", "-n", c.ns, "-f", f, "-o", "name")
	}
	start := time.Now()
	out, err := apply(c.ns+"-rest.yaml", rest)
	if err != nil {
		t.Fatalf("flatcar-capo manifests %s: refused by %s:\n%s", strings.Join(c.args, " "), m, out)
	}
	noteApplied(applied, c.ns, out)
	if len(topology) > 0 {
		for end := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			out, err = apply(c.ns+"-topology.yaml", topology)
			if err == nil || time.Now().After(end) || !strings.Contains(out, "ClusterClass") {
				break
			}
		}
		if err != nil {
			t.Fatalf("flatcar-capo manifests %s: the topology Cluster refused by %s:\n%s", strings.Join(c.args, " "), m, out)
		}
		noteApplied(applied, c.ns, out)
	}
	t.Logf("admitted %s: manifests %s (%s)", c.ns, strings.Join(c.args, " "), time.Since(start).Round(10*time.Millisecond))
}

// noteApplied notes each "resource.group/name" kubectl printed, a line each; other lines (the API
// server's deprecation warnings for v1beta1, "Warning: cluster.x-k8s.io/v1beta1 Cluster is
// deprecated; ...", come on the same output) are not objects.
func noteApplied(applied map[string][]string, ns, out string) {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Warning:") || len(strings.Fields(l)) != 1 {
			continue
		}
		if res, name, ok := strings.Cut(strings.TrimSpace(l), "/"); ok {
			applied[res] = append(applied[res], ns+"/"+name)
		}
	}
}

// readBackAdmission gets every applied object of a custom resource at each version its CRD
// serves (all but the stored one go through the provider's conversion webhook) and returns how
// many objects it read.
func readBackAdmission(t *testing.T, m *capitest.Management, applied map[string][]string) int {
	t.Helper()
	out, err := m.Kubectl("get", "crd", "-o", "json")
	if err != nil {
		t.Fatalf("the CRDs: %v: %s", err, out)
	}
	var crds struct {
		Items []struct {
			Spec struct {
				Group    string
				Names    struct{ Singular string }
				Versions []struct {
					Name   string
					Served bool
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &crds); err != nil {
		t.Fatal(err)
	}
	served := map[string][]string{} // kubectl's singular.group -> served versions
	for _, c := range crds.Items {
		for _, v := range c.Spec.Versions {
			if v.Served {
				served[c.Spec.Names.Singular+"."+c.Spec.Group] = append(served[c.Spec.Names.Singular+"."+c.Spec.Group], v.Name)
			}
		}
	}
	n := 0
	for res, objs := range applied {
		if !strings.Contains(res, ".") {
			continue // core kinds (Secret)
		}
		if len(served[res]) == 0 {
			t.Errorf("no CRD serves %s", res)
		}
		kind, group, _ := strings.Cut(res, ".")
		for _, v := range served[res] {
			out, err := m.Kubectl("get", kind+"."+v+"."+group, "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`)
			if err != nil {
				t.Errorf("%s at %s: %v: %s", res, v, err, out)
				continue
			}
			got := strings.Fields(out)
			for _, o := range objs {
				if !slices.Contains(got, o) {
					t.Errorf("%s %s does not read back at %s (got %v)", res, o, v, got)
				}
			}
			n += len(objs)
		}
	}
	return n
}
