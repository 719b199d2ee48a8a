// Package capoproof_test is issue 46's CAPO loop: the real CAPO manager creates a cluster's
// servers on a real Nova (internal/testing/novatest) from our image, for the cluster
// `flatcar-capo manifests` makes, beside the real CAPI, CABPK, KCP and ORC managers
// (internal/testing/capitest). Run by `make capo-proof`, not by `make test`.
package capoproof_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// proofEnv opts in, as novatest's TestComputeBootsServer: the cloud takes minutes and GBs.
const proofEnv = "FLATCAR_CAPO_CAPO_PROOF"

// The names the cloud's admin gives the flavors and the key pair, and the cluster's.
const (
	cluster        = "capo"
	cpFlavor       = "capo.control-plane"
	workerFlavor   = "capo.worker"
	keyName        = "capo-proof"
	externalSubnet = "172.24.4.0/24" // novatest's external veth is 172.24.4.1 in the namespace
)

// TestCAPOCreatesServers is issue 46's CAPO loop: a `build --method sysext` image uploaded to
// Glance by `upload`, the cluster `manifests` renders without an API load balancer (as CAPO's
// Flatcar e2e) with what a user adds (a CNI configuration, a login), applied to the management
// side running in the cloud's network namespace, and the real CAPO reconciles it: the
// OpenStackCluster Ready with the network, subnet, router, security groups and API floating IP
// CAPO made in Neutron; each Machine's server made by Nova from our image and flavor, ACTIVE, on
// CAPO's network behind its security group, with the bootstrap data CABPK wrote as its user data
// (read by Ignition from the metadata service); the control plane's kubeadm init and the worker's
// join by themselves, through the API floating IP; both Machines Running and both Nodes Ready
// with their servers' providerIDs; no registry pull (the images are in the image).
func TestCAPOCreatesServers(t *testing.T) {
	testutil.RequireOptIn(t, proofEnv, "the CAPO loop on a real Nova (make capo-proof)")
	testutil.RequireOpenStackCompute(t)
	testutil.RequireTools(t, "qemu-img", "mmdebstrap", "docker-registry")
	ctx, cancel := context.WithTimeout(context.Background(), 220*time.Minute) // the cloud alone took 41 min at load 30
	defer cancel()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "logs")
	if keep := os.Getenv("CAPO_PROOF_DIR"); keep != "" {
		logDir = filepath.Join(keep, "capo-loop")
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var figures []string
	figure := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		t.Log(s)
		figures = append(figures, s)
	}

	// Our image, built as the node proof builds it (real Kubernetes, kubeadm's images preloaded).
	start := time.Now()
	imgs := newImages(t, dir)
	image, reg := imgs.build(standin.Version), imgs.reg
	imageName := strings.TrimSuffix(filepath.Base(image), ".qcow2")
	figure("image built (build --method sysext) in %.0f s", time.Since(start).Seconds())

	start = time.Now()
	cloud := novatest.StartT(ctx, t, novatest.Options{Dir: filepath.Join(dir, "cloud"), LogDir: logDir, Log: t.Logf})
	figure("cloud up in %.0f s", time.Since(start).Seconds())
	t.Cleanup(func() { keepConsoles(t, cloud, logDir) }) // before the cloud stops (cleanups run last first)

	// What the cloud's admin gives a CAPO user: the image (the product's upload), flavors, an
	// external network for the routers and floating IPs, a key pair.
	start = time.Now()
	up := testutil.RunCmd(t, testutil.Cmd{Prefix: []string{"ip", "netns", "exec", cloud.Netns},
		Args: []string{"upload", image, "--name", imageName, "--cloud", "local", "--visibility", "public"},
		Env:  []string{"OS_CLIENT_CONFIG_FILE=" + cloud.CloudsYAML}, Timeout: 15 * time.Minute}).MustSucceed(t)
	f := strings.Fields(up.Stdout)
	if len(f) == 0 {
		t.Fatalf("upload printed no image ID:\n%s", up.Combined())
	}
	imageID := f[len(f)-1]
	figure("image %s uploaded by `flatcar-capo upload` in %.0f s", imageID, time.Since(start).Seconds())
	osc := func(args ...string) string {
		t.Helper()
		out, err := cloud.OpenStack(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	// min_ram is 2048 (upload's kubeadm minimum); min_disk the image's virtual size.
	cpFlavorID := osc("flavor", "create", "--ram", "3072", "--disk", "20", "--vcpus", "2", "-f", "value", "-c", "id", cpFlavor)
	workerFlavorID := osc("flavor", "create", "--ram", "2048", "--disk", "20", "--vcpus", "1", "-f", "value", "-c", "id", workerFlavor)
	extID := osc("network", "create", "--external", "--provider-network-type", "flat", "--provider-physical-network", "extnet",
		"-f", "value", "-c", "id", "public")
	osc("subnet", "create", "--network", "public", "--subnet-range", externalSubnet, "--gateway", "172.24.4.1",
		"--no-dhcp", "--allocation-pool", "start=172.24.4.10,end=172.24.4.99", "public-subnet")
	key, pub := standin.TestUserKey(t)
	osc("keypair", "create", "--public-key", key+".pub", keyName)

	// The management side, in the cloud's namespace: CAPO and ORC reach the APIs where
	// Keystone's catalog says they are, and the floating IPs on the external network.
	start = time.Now()
	mgmt := capitest.Start(t, capitest.Options{Pairing: capitest.Pairings[0], Netns: cloud.Netns,
		Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane, capitest.Infrastructure, capitest.ORC}})
	t.Cleanup(func() { keepLogs(t, mgmt.Dir, logDir) })
	var steps []string
	for _, s := range mgmt.Timings {
		steps = append(steps, fmt.Sprintf("%s %.0f s", s.Step, s.Took.Seconds()))
	}
	figure("management side (%s, with ORC) up in %.0f s: %s", capitest.Pairings[0], time.Since(start).Seconds(), strings.Join(steps, ", "))

	// The cluster as a user makes it.
	manifest := filepath.Join(dir, "cluster.yaml")
	args := []string{"manifests", "--flavor", "sysext-baked", "--api-server-load-balancer=false", "--output-file", manifest,
		"--image-name", imageName, "--cluster-name", cluster, "--kubernetes-version", kubetest.RealVersion}
	for _, kv := range []string{"WORKER_MACHINE_COUNT=1", "OPENSTACK_CLOUD=local",
		"OPENSTACK_CONTROL_PLANE_MACHINE_FLAVOR=" + cpFlavor, "OPENSTACK_NODE_MACHINE_FLAVOR=" + workerFlavor,
		"OPENSTACK_DNS_NAMESERVERS=172.24.4.1", "OPENSTACK_EXTERNAL_NETWORK_ID=" + extID, "OPENSTACK_FAILURE_DOMAIN=nova",
		"OPENSTACK_SSH_KEY_NAME=" + keyName, "OPENSTACK_CLOUD_YAML_B64=" + base64.StdEncoding.EncodeToString(cloud.AdminCloudsYAML("local")),
		"OPENSTACK_CLOUD_CACERT_B64=" + base64.StdEncoding.EncodeToString([]byte("\n"))} {
		args = append(args, "--set", kv)
	}
	testutil.Run(t, args...).MustSucceed(t)
	// What a user adds before applying: a CNI configuration (the image carries the plugins) and a
	// login, with an SSH rule for it (the proof reads the guests' journals when a step fails).
	user := capitest.Additions{Users: []capitest.User{{Name: standin.TestUserName, SSHKey: pub, Groups: "sudo"}},
		Files: map[string]string{"/etc/cni/net.d/10-capo-proof.conflist": capitest.BridgeCNI}}
	// And, as on any slow hardware, longer leader elections for the control plane's controllers:
	// on a TCG guest beside others the API answers a lease renewal in more than the default 10 s
	// now and then, and kube-controller-manager (which signs the joining kubelets' CSRs) exits on
	// each lost lease (17 restarts in the third run, the new worker's CSR never signed).
	cp := user
	cp.ExtraArgs = map[string]map[string]string{"controllerManager": slowLeaderElection, "scheduler": slowLeaderElection}
	if err := capitest.AddToSpecs(manifest, cp, user); err != nil {
		t.Fatal(err)
	}
	addSSHRule(t, manifest)
	pullsBefore := reg.PullRequests()
	applied := time.Now()
	if out, err := mgmt.Kubectl("apply", "--server-side", "-n", "default", "-f", manifest); err != nil {
		t.Fatalf("the management side refused the manifest: %v\n%s", err, out)
	}

	// CAPO's work, then the nodes' own, watched as one timeline: the OpenStackCluster Ready, each
	// Machine's server ACTIVE, the control plane's kubeadm init (its Machine Running: CAPI found
	// its Node by providerID), CABPK's worker data, the worker's server and join, both Nodes Ready.
	w := &watch{t: t, m: mgmt}
	var osc1 openStackCluster
	var machines []machine
	var wl *workload
	var nodes []node
	seen := map[string]bool{}
	event := func(what string) {
		if !seen[what] {
			seen[what] = true
			figure("%s %.0f s after apply", what, time.Since(applied).Seconds())
		}
	}
	report := func() string {
		r := w.describe()
		if wl != nil {
			for _, m := range machines {
				r += "\n" + wl.guestReport(m, osc1.Spec.ControlPlaneEndpoint.Host)
			}
		}
		return r
	}
	var allReady time.Time // both nodes Ready: the cloud controller manager has 20 min more
	for deadline := applied.Add(75 * time.Minute); ; time.Sleep(10 * time.Second) {
		w.get("openstackclusters.infrastructure.cluster.x-k8s.io/"+cluster, &osc1)
		if osc1.Status.Ready {
			event("OpenStackCluster Ready")
		}
		machines = w.machines()
		running := 0
		for _, m := range machines {
			role := "worker"
			if m.controlPlane() {
				role = "control plane"
			}
			if m.Spec.Bootstrap.DataSecretName != "" {
				event(role + " bootstrap data (CABPK)")
			}
			if m.infra.Status.Ready && m.infra.Spec.ProviderID != "" {
				event(role + " server ACTIVE (OpenStackMachine ready)")
			}
			if m.Status.Phase == "Running" {
				event(role + " Machine Running (its Node found)")
				running++
			}
		}
		if wl == nil && osc1.Status.Ready {
			wl = newWorkload(t, ctx, w, cloud, dir, key)
		}
		// The cloud controller manager, applied as users do once the API answers.
		if running > 0 && !seen["cloud controller manager applied"] && wl.applyOCCM(imgs.occmDir) {
			event("cloud controller manager applied")
		}
		readyNodes, initialized := 0, 0
		if running > 0 {
			nodes = wl.nodes()
			for _, n := range nodes {
				if n.ready() {
					event("node " + n.Metadata.Name + " Ready")
					readyNodes++
				}
				if n.ready() && !n.tainted(uninitializedTaint) {
					event("node " + n.Metadata.Name + " initialized by the cloud controller manager")
					initialized++
				}
			}
		}
		if len(machines) == 2 && running == 2 && readyNodes == 2 && initialized == 2 {
			break
		}
		if readyNodes == 2 && allReady.IsZero() {
			allReady = time.Now()
		}
		if !allReady.IsZero() && time.Since(allReady) > 20*time.Minute {
			t.Fatalf("both nodes Ready for 20 min, %d initialized by the cloud controller manager:\n%s", initialized, wl.occmReport())
		}
		if msg := w.failure(osc1, machines); msg != "" {
			t.Fatalf("CAPO failed: %s\n%s", msg, report())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the cluster did not come up within 75 min of the apply (%d Machines, %d Running, %d Nodes Ready, %d initialized):\n%s\n%s",
				len(machines), running, readyNodes, initialized, report(), wl.occmReport())
		}
	}
	// What CAPO made, read back from Neutron and Nova.
	neutron := newOpenStack(t, ctx, cloud)
	net := neutron.network(osc1.Status.Network.ID)
	if len(osc1.Status.Network.Subnets) != 1 || osc1.Status.Router.ID == "" || osc1.Status.ControlPlaneSecurityGroup.ID == "" ||
		osc1.Status.WorkerSecurityGroup.ID == "" || osc1.Spec.ControlPlaneEndpoint.Host == "" {
		t.Fatalf("OpenStackCluster status lacks CAPO's network, subnet, router, security groups or endpoint: %+v", osc1)
	}
	subnet := neutron.subnet(osc1.Status.Network.Subnets[0].ID)
	if subnet.CIDR != "10.6.0.0/24" || subnet.NetworkID != net.ID {
		t.Errorf("CAPO's subnet %s is %s on %s, want the template's 10.6.0.0/24 on %s", subnet.ID, subnet.CIDR, subnet.NetworkID, net.ID)
	}
	router := neutron.router(osc1.Status.Router.ID)
	if router.GatewayInfo.NetworkID != extID {
		t.Errorf("CAPO's router %s has external gateway %q, want the external network %s", router.ID, router.GatewayInfo.NetworkID, extID)
	}
	fip := neutron.floatingIP(osc1.Spec.ControlPlaneEndpoint.Host)
	t.Logf("CAPO made network %s (%s), subnet %s, router %s, security groups %s and %s, API floating IP %s (port %s)", net.Name, net.ID,
		subnet.CIDR, router.ID, osc1.Status.ControlPlaneSecurityGroup.Name, osc1.Status.WorkerSecurityGroup.Name, fip.FloatingIP, fip.PortID)

	var lines []string
	lines = append(lines, fmt.Sprintf("glance image: %s %s", imageName, imageID))
	servers := 0
	for _, m := range machines {
		servers++
		id := strings.TrimPrefix(m.infra.Spec.ProviderID, "openstack:///")
		s := neutron.server(id)
		role, flavorID, sg := "worker", workerFlavorID, osc1.Status.WorkerSecurityGroup
		if m.controlPlane() {
			role, flavorID, sg = "control plane", cpFlavorID, osc1.Status.ControlPlaneSecurityGroup
		}
		if s.Status != "ACTIVE" {
			t.Errorf("%s server %s is %s", role, s.Name, s.Status)
		}
		if s.Image["id"] != imageID {
			t.Errorf("%s server %s booted image %v, want ours, %s", role, s.Name, s.Image["id"], imageID)
		}
		if s.Flavor["id"] != flavorID {
			t.Errorf("%s server %s has flavor %v, want %s", role, s.Name, s.Flavor["id"], flavorID)
		}
		if s.KeyName != keyName {
			t.Errorf("%s server %s has key pair %q, want %q", role, s.Name, s.KeyName, keyName)
		}
		ports := neutron.ports(id)
		if len(ports) != 1 || ports[0].NetworkID != net.ID || !slices.Contains(ports[0].SecurityGroups, sg.ID) {
			t.Errorf("%s server %s's ports %+v: want one on CAPO's network %s in security group %s", role, s.Name, ports, net.ID, sg.Name)
		}
		data := w.bootstrapData(m)
		got, err := base64.StdEncoding.DecodeString(s.UserData)
		if err != nil || string(got) != string(data) {
			t.Errorf("%s server %s's user data (%d bytes) is not the bootstrap data Secret CABPK wrote for Machine %s (%d bytes): %v",
				role, s.Name, len(got), m.Metadata.Name, len(data), err)
		}
		var addrs []string
		for _, a := range m.infra.Status.Addresses {
			addrs = append(addrs, a.Address)
		}
		if m.Spec.ProviderID != m.infra.Spec.ProviderID {
			t.Errorf("Machine %s has providerID %q, its OpenStackMachine %q", m.Metadata.Name, m.Spec.ProviderID, m.infra.Spec.ProviderID)
		}
		var machineAddrs []string
		for _, a := range m.Status.Addresses {
			machineAddrs = append(machineAddrs, a.Address)
		}
		if !slices.Equal(machineAddrs, addrs) {
			t.Errorf("Machine %s has addresses %v, its OpenStackMachine %v", m.Metadata.Name, machineAddrs, addrs)
		}
		if len(ports) == 1 && (len(ports[0].FixedIPs) == 0 || !slices.Contains(addrs, ports[0].FixedIPs[0].IPAddress)) {
			t.Errorf("OpenStackMachine %s's addresses %v lack its port's %+v", m.infra.Metadata.Name, addrs, ports[0].FixedIPs)
		}
		if m.controlPlane() && (fip.PortID == "" || len(ports) == 0 || fip.PortID != ports[0].ID) {
			t.Errorf("the API server's floating IP %s is on port %q, want the control plane's port", fip.FloatingIP, fip.PortID)
		}
		built := s.LaunchedAt.Sub(s.Created)
		figure("%s server %s (Machine %s, providerID %s): ACTIVE (launched) %.0f s after Nova's create; user data %d bytes, %d in Nova (base64, its limit 65535); addresses %v",
			role, s.Name, m.Metadata.Name, m.Spec.ProviderID, built.Seconds(), len(got), len(s.UserData), addrs)
		lines = append(lines, fmt.Sprintf("server %s %s %s", s.Name, s.Status, imageName))
	}
	if servers != 2 {
		t.Errorf("CAPO made %d servers, want the control plane's and the worker's", servers)
	}
	for _, m := range w.machines() {
		lines = append(lines, fmt.Sprintf("machine %s %s", m.Metadata.Name, m.Status.Phase))
		if m.Status.Phase != "Running" {
			t.Errorf("Machine %s is %s, want Running", m.Metadata.Name, m.Status.Phase)
		}
	}
	// The workload cluster's Nodes: each Machine's, Ready, with its server's providerID (the
	// kubelet's --provider-id from the metadata service's instance UUID).
	byName := map[string]node{}
	for _, n := range wl.nodes() {
		byName[n.Metadata.Name] = n
	}
	tainted := 0
	for _, m := range w.machines() {
		n, ok := byName[m.Status.NodeRef.Name]
		if !ok {
			t.Errorf("Machine %s's node %q is not in the workload cluster", m.Metadata.Name, m.Status.NodeRef.Name)
			continue
		}
		status := "NotReady"
		if n.ready() {
			status = "Ready"
		}
		if n.Spec.ProviderID != m.Spec.ProviderID || !strings.HasPrefix(n.Spec.ProviderID, "openstack:///") || status != "Ready" {
			t.Errorf("node %s is %s with providerID %q, want Ready with its Machine's %q", n.Metadata.Name, status, n.Spec.ProviderID, m.Spec.ProviderID)
		}
		if n.tainted(uninitializedTaint) {
			tainted++
		}
		lines = append(lines, fmt.Sprintf("node %s %s %s", n.Metadata.Name, status, n.Spec.ProviderID))
	}
	lines = append(lines, fmt.Sprintf("uninitialized taints: %d", tainted))
	if tainted > 0 {
		t.Errorf("%d nodes keep the %s taint: no cloud controller manager initialized them", tainted, uninitializedTaint)
	}
	// The guests have no route to the registry: kubeadm's and the cloud controller manager's
	// images came preloaded in the image. (The rollout's build pulls them for its image: counted
	// from its patch on.)
	pulls := reg.PullRequests() - pullsBefore
	// The upgrade (rollout_test.go): the worker replaced from a newer release's image, as users do.
	line, rolloutPulls := rollOut(t, ctx, imgs, cloud, w, wl, neutron, osc1.Spec.ControlPlaneEndpoint.Host, logDir, figure)
	lines = append(lines, line)
	pulls += rolloutPulls
	lines = append(lines, fmt.Sprintf("registry pulls during boot: %d", pulls))
	if pulls != 0 {
		t.Errorf("the registry served %d pulls during the boots: %v", pulls, reg.Seen())
	}
	for _, l := range lines {
		t.Log(l)
	}
	if t.Failed() {
		return
	}
	fmt.Println("CAPO-PROOF-BEGIN")
	for _, l := range lines {
		fmt.Println(l)
	}
	for _, f := range figures {
		fmt.Println("figure: " + f)
	}
	fmt.Println("CAPO-PROOF-END")
}

// keepLogs copies the management side's logs (the CAPO and ORC managers') next to the cloud's.
func keepLogs(t *testing.T, from, to string) {
	logs, _ := filepath.Glob(filepath.Join(from, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(to, "mgmt-"+filepath.Base(l)), b, 0o600)
		}
		if err != nil {
			t.Logf("keeping %s: %v", l, err)
		}
	}
}

// decode is json.Unmarshal that fails the test.
func decode(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%.2000s", what, err, b)
	}
}
