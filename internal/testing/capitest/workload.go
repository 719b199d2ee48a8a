package capitest

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ManifestSets are `manifests` flags that fill every clusterctl variable of the templates for
// a proof cluster of one control-plane node and one worker: the output is then what a user
// applies to the management cluster.
func ManifestSets(cluster, version string) []string {
	args := []string{"--cluster-name", cluster, "--kubernetes-version", version}
	for _, kv := range []string{"CONTROL_PLANE_MACHINE_COUNT=1", "WORKER_MACHINE_COUNT=1", "OPENSTACK_CLOUD=local",
		"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR=m1.medium", "OPENSTACK_NODE_MACHINE_FLAVOR=m1.medium",
		"OPENSTACK_DNS_NAMESERVERS=10.0.2.3", "OPENSTACK_EXTERNAL_NETWORK_ID=6f1f7a5e-2b7e-4c1a-9d3e-0a5b8c7d9e10", "OPENSTACK_FAILURE_DOMAIN=nova",
		"OPENSTACK_SSH_KEY_NAME=proof", "OPENSTACK_CLOUD_YAML_B64=" + base64.StdEncoding.EncodeToString([]byte("clouds: {}\n")),
		"OPENSTACK_CLOUD_CACERT_B64=" + base64.StdEncoding.EncodeToString([]byte("\n"))} {
		args = append(args, "--set", kv)
	}
	return args
}

// Workload is a cluster created on the management side from a `flatcar-capo manifests` output,
// with the test as its infrastructure provider: it does what CAPO's controllers would do once
// OpenStack had made the network, the load balancer and the servers.
type Workload struct {
	m                     *Management
	Name, Namespace       string
	openStackCluster, dir string
}

// CreateCluster applies manifest (a file, every variable set) to namespace default as a user
// does (kubectl apply, through the admission webhooks) and plays CAPO for its Cluster: the
// OpenStackCluster gets endpoint (host:port) as its controlPlaneEndpoint, as CAPO sets it from
// the API load balancer or the first server, and is marked provisioned.
func (m *Management) CreateCluster(t testing.TB, manifest, endpoint string) *Workload {
	t.Helper()
	w := &Workload{m: m, Namespace: "default", dir: m.Dir}
	if out, err := m.Kubectl("apply", "--server-side", "--field-manager", "flatcar-capo-test", "-n", w.Namespace, "-f", manifest); err != nil {
		t.Fatalf("%s refused the manifest: %v\n%s", m, err, out)
	}
	var c struct {
		Metadata struct{ Name string }
		Spec     struct{ InfrastructureRef struct{ Kind, Name string } }
	}
	w.get(t, "clusters.v1beta2.cluster.x-k8s.io", "", &c)
	w.Name, w.openStackCluster = c.Metadata.Name, c.Spec.InfrastructureRef.Name
	if c.Spec.InfrastructureRef.Kind != "OpenStackCluster" {
		t.Fatalf("the Cluster's infrastructure is a %q, want an OpenStackCluster", c.Spec.InfrastructureRef.Kind)
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	w.patch(t, "openstackcluster/"+w.openStackCluster, false, map[string]any{"spec": map[string]any{"controlPlaneEndpoint": map[string]any{"host": host, "port": p}}})
	w.patch(t, "openstackcluster/"+w.openStackCluster, true, map[string]any{"status": map[string]any{"ready": true, "initialization": map[string]any{"provisioned": true}}})
	return w
}

// Machine is a CAPI Machine of the workload cluster and its bootstrap data.
type Machine struct {
	Name, InfrastructureName string
	// UserData is the value of the bootstrap data Secret CABPK wrote: what CAPO gives Nova as
	// the server's user data (the config drive's openstack/latest/user_data).
	UserData []byte
	Format   string // the Secret's format: ignition or cloud-config
}

// BootstrapData waits (at most timeout) for the control plane's first Machine (controlPlane)
// or a MachineDeployment's Machine, and for the bootstrap data Secret CABPK writes for it.
func (w *Workload) BootstrapData(t testing.TB, controlPlane bool, timeout time.Duration) Machine {
	t.Helper()
	sel := "cluster.x-k8s.io/cluster-name=" + w.Name + ",cluster.x-k8s.io/deployment-name"
	if controlPlane {
		sel = "cluster.x-k8s.io/cluster-name=" + w.Name + ",cluster.x-k8s.io/control-plane"
	}
	for end := time.Now().Add(timeout); ; time.Sleep(2 * time.Second) {
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     struct {
					Bootstrap         struct{ DataSecretName string }
					InfrastructureRef struct{ Name string }
				}
			}
		}
		w.get(t, "machines.v1beta2.cluster.x-k8s.io", sel, &list)
		for _, it := range list.Items {
			if it.Spec.Bootstrap.DataSecretName == "" {
				continue
			}
			var s struct {
				Data struct{ Value, Format []byte }
			}
			w.get(t, "secret/"+it.Spec.Bootstrap.DataSecretName, "", &s)
			return Machine{Name: it.Metadata.Name, InfrastructureName: it.Spec.InfrastructureRef.Name, UserData: s.Data.Value, Format: string(s.Data.Format)}
		}
		if time.Now().After(end) {
			t.Fatalf("no bootstrap data for a Machine (%s) after %s:\n%s", sel, timeout, w.Describe())
		}
	}
}

// Provision plays CAPO for machine once its server is up: the OpenStackMachine gets the server's
// provider ID and addresses and is marked provisioned. CAPI copies them to the Machine and finds
// the Node by that provider ID (kubelet's --provider-id) in the workload cluster.
func (w *Workload) Provision(t testing.TB, m Machine, providerID, address string) {
	t.Helper()
	obj := "openstackmachine/" + m.InfrastructureName
	w.patch(t, obj, false, map[string]any{"spec": map[string]any{"providerID": providerID}})
	w.patch(t, obj, true, map[string]any{"status": map[string]any{"ready": true, "initialization": map[string]any{"provisioned": true},
		"instanceState": "ACTIVE", "addresses": []map[string]any{{"type": "InternalIP", "address": address}}}})
}

// WaitNodeRef waits until CAPI has found machine's Node in the workload cluster (through the
// <cluster>-kubeconfig Secret at the control-plane endpoint) and returns the Node's name.
func (w *Workload) WaitNodeRef(t testing.TB, m Machine, timeout time.Duration) string {
	t.Helper()
	for end := time.Now().Add(timeout); ; time.Sleep(5 * time.Second) {
		var mach struct {
			Status struct{ NodeRef struct{ Name string } }
		}
		w.get(t, "machines.v1beta2.cluster.x-k8s.io/"+m.Name, "", &mach)
		if n := mach.Status.NodeRef.Name; n != "" {
			return n
		}
		if time.Now().After(end) {
			t.Fatalf("CAPI found no Node for Machine %s after %s:\n%s", m.Name, timeout, w.Describe())
		}
	}
}

// Describe is what the management side says about the workload cluster, for a failure.
func (w *Workload) Describe() string {
	out, _ := w.m.Kubectl("get", "-n", w.Namespace, "clusters,kubeadmcontrolplanes,machinedeployments,machines,kubeadmconfigs,openstackmachines", "-o", "wide")
	conds, _ := w.m.Kubectl("get", "-n", w.Namespace, "clusters.v1beta2.cluster.x-k8s.io,kubeadmcontrolplanes,machines.v1beta2.cluster.x-k8s.io,kubeadmconfigs", "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name}:{range .status.conditions[?(@.status!="True")]} {.type}={.status} {.reason} {.message};{end}{"\n"}{end}`)
	logs := ""
	for _, p := range w.m.procs {
		if strings.HasSuffix(p.name, "-manager") {
			logs += "\n" + p.name + ":\n" + lastLines(p.log, 8)
		}
	}
	return out + "\n" + conds + logs
}

// get reads what (kubectl get's resource[/name]) with an optional label selector into v.
func (w *Workload) get(t testing.TB, what, sel string, v any) {
	t.Helper()
	args := []string{"get", "-n", w.Namespace, what, "-o", "json"}
	if sel != "" {
		args = append(args, "-l", sel)
	}
	if what == "clusters.v1beta2.cluster.x-k8s.io" {
		var l struct{ Items []json.RawMessage }
		out, err := w.m.Kubectl(args...)
		if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l.Items) != 1 {
			t.Fatalf("kubectl %s: want one Cluster: %v\n%s", strings.Join(args, " "), err, out)
		}
		if err := json.Unmarshal(l.Items[0], v); err != nil {
			t.Fatal(err)
		}
		return
	}
	out, err := w.m.Kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
}

// patch merges p into obj, into its status subresource when status.
func (w *Workload) patch(t testing.TB, obj string, status bool, p map[string]any) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(w.dir, "patch.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"patch", "-n", w.Namespace, obj, "--type", "merge", "--patch-file", f}
	if status {
		args = append(args, "--subresource", "status")
	}
	if out, err := w.m.Kubectl(args...); err != nil {
		t.Fatalf("kubectl %s (%s): %v\n%s", strings.Join(args, " "), b, err, out)
	}
}
