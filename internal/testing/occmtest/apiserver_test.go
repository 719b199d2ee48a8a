package occmtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestAPIServerAdmitsManifests applies what Manifests renders to a real kube-apiserver (kubectl's
// strict field validation) and reads the DaemonSet back as the cluster stores it: the pull
// policy the API server defaulted is IfNotPresent (the preloaded image is never pulled), and its
// nodeSelector selects a node labelled as kubeadm labels a control plane
// (cmd/kubeadm/app/phases/markcontrolplane: node-role.kubernetes.io/control-plane="").
func TestAPIServerAdmitsManifests(t *testing.T) {
	testutil.RequireReal(t, "a real kube-apiserver and the manifests of scripts/install-occm.sh's build")
	dir := Dir(t)
	m := capitest.Start(t, capitest.Options{Pairing: capitest.Pairings[0], InfrastructureCRDs: true,
		Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane}})
	out, err := Manifests(dir, Cloud{AuthURL: "http://10.0.0.2:5000/v3", Username: "admin", Password: "s3cret", Project: "admin", Domain: "Default", Region: "RegionOne"},
		"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "occm.yaml")
	if err := os.WriteFile(f, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := m.Kubectl("apply", "--validate=strict", "-f", f); err != nil {
		t.Fatalf("the API server refused the manifests: %v\n%s", err, o)
	}
	get := func(v any, args ...string) {
		t.Helper()
		o, err := m.Kubectl(append([]string{"get", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("kubectl get %v: %v\n%s", args, err, o)
		}
		if err := json.Unmarshal([]byte(o), v); err != nil {
			t.Fatalf("kubectl get %v: %v", args, err)
		}
	}
	var ds appsv1.DaemonSet
	get(&ds, "-n", "kube-system", "daemonset/openstack-cloud-controller-manager")
	ref, _ := imageRef(dir)
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != ref || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("the stored DaemonSet runs %s with pull policy %s, want %s, IfNotPresent", c.Image, c.ImagePullPolicy, ref)
	}
	if n := len(c.Args); n < 3 || c.Args[n-3] != "--bind-address=127.0.0.1" || c.Args[n-2] != "--leader-elect-lease-duration=60s" || c.Args[n-1] != "--leader-elect-renew-deadline=40s" {
		t.Errorf("the stored DaemonSet's args %q do not end with upstream's last and the two added", c.Args)
	}
	var secret corev1.Secret
	get(&secret, "-n", "kube-system", "secret/cloud-config")
	if !strings.Contains(string(secret.Data["cloud.conf"]), `auth-url="http://10.0.0.2:5000/v3"`) {
		t.Errorf("the stored cloud.conf:\n%s", secret.Data["cloud.conf"])
	}

	node := `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cp-0", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": "cp-0"}}}`
	nf := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(nf, []byte(node), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := m.Kubectl("create", "-f", nf); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	var sel []string
	for k, v := range ds.Spec.Template.Spec.NodeSelector {
		sel = append(sel, k+"="+v)
	}
	sort.Strings(sel)
	var nodes corev1.NodeList
	get(&nodes, "nodes", "-l", strings.Join(sel, ","))
	if len(nodes.Items) != 1 {
		t.Errorf("the DaemonSet's nodeSelector %v selects %d nodes, want kubeadm's control plane", sel, len(nodes.Items))
	}
}
