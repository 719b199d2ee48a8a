package capoproof_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/occmtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
)

// uninitializedTaint is the taint the kubelet (cloud-provider external) puts on a node until
// the cloud controller manager initializes it.
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// sshRule is what a user adds to the OpenStackCluster's managed security groups to reach the
// nodes from the external network, and the workers from the control plane (the proof's jump
// host; CAPO opens no SSH without a bastion): the proof's way to read a guest's journal when a
// step fails.
const sshRule = `    - description: SSH from the external network (the proof's journal reads)
      direction: ingress
      etherType: IPv4
      name: SSH
      portRangeMax: 22
      portRangeMin: 22
      protocol: tcp
      remoteIPPrefix: ` + externalSubnet + `
    - description: SSH from the control plane (the proof's jump host to the workers)
      direction: ingress
      etherType: IPv4
      name: SSH from the control plane
      portRangeMax: 22
      portRangeMin: 22
      protocol: tcp
      remoteManagedGroups:
      - controlplane
`

// addSSHRule puts sshRule into the manifest's allNodesSecurityGroupRules.
func addSSHRule(t *testing.T, manifest string) {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	const at = "    allNodesSecurityGroupRules:\n"
	if strings.Count(string(b), at) != 1 {
		t.Fatalf("%s: want one %q to add the SSH rule to", manifest, strings.TrimSpace(at))
	}
	if err := os.WriteFile(manifest, []byte(strings.Replace(string(b), at, at+sshRule, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// workload reaches the workload cluster from the cloud's namespace, where its API floating IP
// is, with the kubeconfig CAPI keeps in the management side.
type workload struct {
	t          *testing.T
	ctx        context.Context
	cloud      *novatest.Cloud
	kubeconfig string
	key        string // the proof user's SSH key
}

func newWorkload(t *testing.T, ctx context.Context, w *watch, cloud *novatest.Cloud, dir, key string) *workload {
	var s struct{ Data struct{ Value []byte } }
	w.get("secret/"+cluster+"-kubeconfig", &s)
	kc := filepath.Join(dir, "workload.kubeconfig")
	if err := os.WriteFile(kc, s.Data.Value, 0o600); err != nil {
		t.Fatal(err)
	}
	return &workload{t: t, ctx: ctx, cloud: cloud, kubeconfig: kc, key: key}
}

// kubectl runs kubectl against the workload cluster; errors are returned, not fatal (a TCG
// control plane times requests out now and then).
func (wl *workload) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(wl.ctx, 2*time.Minute)
	defer cancel()
	out, err := wl.cloud.Command(ctx, append([]string{"kubectl", "--kubeconfig", wl.kubeconfig, "--request-timeout", "60s"}, args...)...).CombinedOutput()
	return string(out), err
}

// node is what the proof reads of a workload Node.
type node struct {
	Metadata struct{ Name string }
	Spec     struct {
		ProviderID string
		Taints     []struct{ Key, Effect string }
	}
	Status struct {
		Conditions []condition
	}
}

func (n node) ready() bool {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func (n node) tainted(key string) bool {
	for _, x := range n.Spec.Taints {
		if x.Key == key {
			return true
		}
	}
	return false
}

// nodes are the workload cluster's Nodes (nil when the API does not answer).
func (wl *workload) nodes() []node {
	out, err := wl.kubectl("get", "nodes", "-o", "json")
	if err != nil {
		// kubectl prints an empty List before its error: the error line is what tells.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		wl.t.Logf("workload nodes: %v: %.300s", err, lines[len(lines)-1])
		return nil
	}
	var l struct{ Items []node }
	decode(wl.t, "nodes", []byte(out), &l)
	return l.Items
}

// ssh runs cmd on the node at addr (the control plane's floating IP; a worker through it) as
// the proof's user, and returns its output with any error in it: for failure reports.
func (wl *workload) ssh(addr, via, cmd string) string {
	args := []string{"ssh", "-i", wl.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=20", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"}
	if via != "" {
		args = append(args, "-o", fmt.Sprintf("ProxyCommand=ssh -i %s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -W %%h:%%p %s@%s",
			wl.key, standin.TestUserName, via))
	}
	ctx, cancel := context.WithTimeout(wl.ctx, 2*time.Minute)
	defer cancel()
	out, err := wl.cloud.Command(ctx, append(args, standin.TestUserName+"@"+addr, cmd)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s(ssh %s: %v)", out, addr, err)
	}
	return string(out)
}

// consoleTail is the end of a server's console log as Nova gives it.
// keepConsole writes server id's whole console log (its serial console through Nova) to
// dir/console-NAME.log, for the proof's kept logs.
func keepConsole(t *testing.T, cloud *novatest.Cloud, dir, id, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := cloud.OpenStack(ctx, "console", "log", "show", id)
	if err != nil {
		t.Logf("console log of %s (%s): %v", name, id, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".log"), out, 0o600); err != nil {
		t.Log(err)
	}
}

// keepConsoles keeps every server's console log (keepConsole) that Nova still has.
func keepConsoles(t *testing.T, cloud *novatest.Cloud, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := cloud.OpenStack(ctx, "server", "list", "-f", "value", "-c", "ID", "-c", "Name")
	if err != nil {
		t.Logf("server list for the console logs: %v", err)
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			keepConsole(t, cloud, dir, f[0], f[1])
		}
	}
}

func consoleTail(ctx context.Context, cloud *novatest.Cloud, id string, lines int) string {
	out, err := cloud.OpenStack(ctx, "console", "log", "show", "--lines", fmt.Sprint(lines), id)
	if err != nil {
		return fmt.Sprintf("(console log of %s: %v)", id, err)
	}
	return string(out)
}

// guestReport is what a failure report shows of a machine's guest: its console's end and, when
// SSH reaches it, kubeadm's and the kubelet's journals.
func (wl *workload) guestReport(m machine, fip string) string {
	id := strings.TrimPrefix(m.infra.Spec.ProviderID, "openstack:///")
	if id == "" {
		return fmt.Sprintf("Machine %s: no server yet\n", m.Metadata.Name)
	}
	addr, via := fip, ""
	if !m.controlPlane() {
		via = fip
		if len(m.infra.Status.Addresses) > 0 {
			addr = m.infra.Status.Addresses[0].Address
		}
	}
	return fmt.Sprintf("== Machine %s, server %s: console\n%s\n== its journal (kubeadm, kubelet)\n%s\n", m.Metadata.Name, id,
		consoleTail(wl.ctx, wl.cloud, id, 40),
		wl.ssh(addr, via, "sudo journalctl -b --no-pager -u kubeadm.service | tail -60; sudo journalctl -b --no-pager -u kubelet.service | tail -30; ip route"))
}

// slowLeaderElection are kube-controller-manager's, kube-scheduler's and the cloud controller
// manager's leader-election flags
// for a slow control plane: the lease renewed within 40 s instead of 10 s (defaults 15 s, 10 s,
// 2 s), so a lease renewal the loaded API answers late does not end the process.
var slowLeaderElection = map[string]string{
	"leader-elect-lease-duration": "60s",
	"leader-elect-renew-deadline": "40s",
	"leader-elect-retry-period":   "5s",
}

// applyOCCM applies the cloud controller manager as its docs tell users (occmtest.Manifests:
// the cloud-config Secret, upstream's RBAC and DaemonSet), with the credentials a guest uses
// (novatest's GuestCloudsYAML: Keystone and the catalog's internal endpoints where guests reach
// them). It reports whether the workload API took it (a TCG control plane refuses now and then:
// the caller tries again).
func (wl *workload) applyOCCM(dir string) bool {
	t := wl.t
	c, err := occmtest.FromCloudsYAML(wl.cloud.GuestCloudsYAML("local"), "local")
	if err != nil {
		t.Fatal(err)
	}
	// The manager elects a leader as kube-controller-manager does: the same slow-hardware times.
	var args []string
	for _, k := range slices.Sorted(maps.Keys(slowLeaderElection)) {
		args = append(args, "--"+k+"="+slowLeaderElection[k])
	}
	m, err := occmtest.Manifests(dir, c, args...)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(filepath.Dir(wl.kubeconfig), "occm.yaml")
	if err := os.WriteFile(f, m, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := wl.kubectl("apply", "-f", f); err != nil {
		t.Logf("applying the cloud controller manager: %v: %.300s", err, out)
		return false
	}
	return true
}

// occmReport is the cloud controller manager's pods and their last log lines, for a failure.
func (wl *workload) occmReport() string {
	if wl == nil {
		return ""
	}
	pods, _ := wl.kubectl("get", "pods", "-n", "kube-system", "-o", "wide")
	logs, _ := wl.kubectl("logs", "-n", "kube-system", "daemonset/openstack-cloud-controller-manager", "--tail", "40")
	return "kube-system pods:\n" + pods + "\nthe cloud controller manager's log:\n" + logs
}
