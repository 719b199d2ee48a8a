package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// manifests --clusterclass: a Flatcar ClusterClass, its templates (with the flavor's Ignition)
// and a Cluster using it through topology, with the image, version and machine flavors as the
// Cluster's; strictly validated, linted clean, and the variables' patches reach real paths of
// the templates.
func TestManifestsClusterClass(t *testing.T) {
	out := filepath.Join(t.TempDir(), "class.yaml")
	args := []string{"manifests", "--clusterclass", "--flavor", "sysext-baked", "--cluster-name", "demo",
		"--image-name", "flatcar-stable-capo", "--kubernetes-version", "v1.34.1", "--output-file", out}
	for _, kv := range []string{"CONTROL_PLANE_MACHINE_COUNT=3", "WORKER_MACHINE_COUNT=2", "OPENSTACK_CLOUD=openstack",
		"OPENSTACK_CLOUD_CACERT_B64=Y2E=", "OPENSTACK_CLOUD_YAML_B64=eQ==", "OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR=m1.large",
		"OPENSTACK_NODE_MACHINE_FLAVOR=m1.medium", "OPENSTACK_DNS_NAMESERVERS=192.0.2.53", "OPENSTACK_EXTERNAL_NETWORK_ID=3f8b1b8e-5c1a-4b8e-9d0c-2a6f4e1d7c90",
		"OPENSTACK_FAILURE_DOMAIN=nova", "OPENSTACK_SSH_KEY_NAME=ops"} {
		args = append(args, "--set", kv)
	}
	r := testutil.Run(t, args...).MustSucceed(t)
	if !strings.Contains(r.Stderr, "Validated 8 documents") || !strings.Contains(r.Stderr, "Every variable is set") {
		t.Fatalf("summary:\n%s", r.Stderr)
	}
	// CAPI refuses a ClusterClass without the ClusterTopology gate: the next step says so.
	if want := capo.GateIgnition + " " + capo.GateTopology + " clusterctl init --infrastructure openstack"; !strings.Contains(r.Stderr, want) {
		t.Errorf("summary lacks %q:\n%s", want, r.Stderr)
	}
	if help := testutil.Run(t, "manifests", "--help").MustSucceed(t).Stdout; strings.Count(help, capo.GateTopology) < 2 {
		t.Errorf("manifests --help names %s in the --clusterclass text and flag fewer than twice:\n%s", capo.GateTopology, help)
	}
	data, _ := os.ReadFile(out)
	m := string(data)
	docs, err := capo.ParseDocuments(out, data)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.APIVersion+" "+d.Kind+" "+d.Name)
	}
	want := []string{
		"cluster.x-k8s.io/v1beta2 ClusterClass flatcar",
		"infrastructure.cluster.x-k8s.io/v1beta1 OpenStackClusterTemplate flatcar",
		"controlplane.cluster.x-k8s.io/v1beta2 KubeadmControlPlaneTemplate flatcar-control-plane",
		"infrastructure.cluster.x-k8s.io/v1beta1 OpenStackMachineTemplate flatcar-control-plane",
		"infrastructure.cluster.x-k8s.io/v1beta1 OpenStackMachineTemplate flatcar-default-worker",
		"bootstrap.cluster.x-k8s.io/v1beta2 KubeadmConfigTemplate flatcar-default-worker",
		"v1 Secret demo-cloud-config",
		"cluster.x-k8s.io/v1beta2 Cluster demo",
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("documents:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{
		"  topology:\n    classRef:\n      name: flatcar\n    version: v1.34.1\n    controlPlane:\n      replicas: 3\n",
		"    - name: imageName\n      value: flatcar-stable-capo\n",
		"    - name: controlPlaneFlavor\n      value: m1.large\n",
		"    - name: workerFlavor\n      value: m1.medium\n",
		"name: locksmithd.service\n                  mask: true", // the sysext-baked flavor's Ignition, in the class's templates
		"path: /spec/template/spec/image/filter/name",
	} {
		if !strings.Contains(m, s) {
			t.Errorf("the ClusterClass manifest lacks %q", s)
		}
	}
	lint := testutil.Run(t, "lint", out).MustSucceed(t)
	if !strings.Contains(lint.Stdout, "8 document(s) checked for CAPI 1.14.2: 0 error(s), 0 warning(s)") {
		t.Errorf("lint:\n%s", lint.Stdout)
	}

	// Unfilled: a clusterctl template whose class name has a default.
	tmpl := testutil.Run(t, "manifests", "--clusterclass").MustSucceed(t)
	if !strings.Contains(tmpl.Stdout, "name: ${CLUSTER_CLASS_NAME:=flatcar}") || !strings.Contains(tmpl.Stderr, "KUBERNETES_VERSION") {
		t.Errorf("template:\n%s", tmpl.Stderr)
	}
	if noLB := testutil.Run(t, "manifests", "--clusterclass", "--api-server-load-balancer=false").MustSucceed(t).Stdout; strings.Contains(noLB, "apiServerLoadBalancer") ||
		!strings.Contains(noLB, "    controlPlane:\n      replicas: 1\n") {
		t.Errorf("--clusterclass without LB:\n%s", noLB)
	}
	testutil.Run(t, "manifests", "--clusterclass", "--flavor", "sysext").MustFail(t, 2, "topology.version", "sysext-baked")
	testutil.Run(t, "manifests", "--clusterclass", "--capi-api", "v1beta1").MustFail(t, 2, "v1beta2")
	testutil.Run(t, "manifests", "--clusterclass", "--image-ref", "id", "--image-id", "6f0c6f5e-0000-4000-8000-000000000001").MustFail(t, 2, "imageName")
}
