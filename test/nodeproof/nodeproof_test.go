package nodeproof_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/capitest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
)

// TestNodeProof (make test, make node-proof) is issue 26's proof: real Kubernetes on our image,
// offline. Real kubeadm/kubelet/kubectl/CNI/crictl from a 127.0.0.1 mirror, kubeadm's real
// control-plane images (built from source) preloaded through --registry-mirror, a `build`, then a
// boot with no route to the registry or any mirror and, on a config drive as Nova gives it, the
// bootstrap data Secret the real CABPK wrote for the control-plane Machine of the cluster
// `flatcar-capo manifests` makes, applied to the real management side (capitest; the test plays
// CAPO). kubeadm init must run by itself through the image's units, the node become Ready, every
// kube-system pod Running, a second guest join with the Secret CABPK then writes for the
// worker's Machine, CAPI find both Nodes, and the registry see no pull.
func TestNodeProof(t *testing.T) {
	testutil.RequireTools(t, "qemu-system-x86_64", "qemu-img", "mmdebstrap", "docker-registry")
	bin := kubetest.RealDir(t)
	ctrd := registrytest.ContainerdDir(t)
	// NODE_PROOF_METHODS picks the methods. The default is what `make test` runs: sysext only,
	// since the packer method's TCG build and boots add ~11 min on 2 cores (make node-proof
	// runs both).
	methods := strings.Fields(os.Getenv("NODE_PROOF_METHODS"))
	if len(methods) == 0 {
		methods = []string{"sysext"}
	}
	for _, method := range methods {
		t.Run(method, func(t *testing.T) { nodeProof(t, method, bin, ctrd) })
	}
}

func nodeProof(t *testing.T, method, bin, ctrd string) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if keep := os.Getenv("NODE_PROOF_DIR"); keep != "" {
		out = filepath.Join(keep, method)
		os.RemoveAll(out)
	}
	ctx := context.Background()
	phase := time.Now()
	step := func(what string) {
		t.Logf("node-proof %s: %s in %.0f s", method, what, time.Since(phase).Seconds())
		phase = time.Now()
	}
	mirror := kubetest.NewReal(t, bin, ctrd)
	reg := registrytest.Start(t)
	refs, err := registrytest.KubeadmImageList(ctx, bin, kubetest.RealVersion)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := reg.PushReal(ctx, bin, refs)
	if err != nil {
		t.Fatal(err)
	}
	step(fmt.Sprintf("real images pushed (%s)", strings.Join(refs, " ")))
	srv := fetchtest.NewServer(t)
	rel := standin.PublishRelease(t, srv, standin.ReleaseOptions{Sysexts: []string{registrytest.ContainerdSysext(t, dir)}})
	step("stand-in release published")

	args := []string{"build", "--method", method, "--base", "qemu", "--oem", "openstack", "--release-server", rel.ReleaseServer,
		"--keyring", rel.Keyring, "--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(dir, "cache"),
		"--output-dir", out, "--registry-mirror", "registry.k8s.io=https://" + reg.Host, "--registry-ca", reg.CAFile}
	if method == "packer" {
		testutil.RequireTools(t, "packer")
		if p := testutil.CachedPacker112(); p != "" {
			args = append(args, "--packer", p)
		}
	}
	res := testutil.RunCmd(t, testutil.Cmd{Args: append(args, mirror.Args()...), Env: []string{"DOCKER_CONFIG=" + reg.DockerConfig}}).MustSucceed(t)
	step("build --method " + method)
	qcows, _ := filepath.Glob(filepath.Join(out, "*.qcow2"))
	if len(qcows) != 1 {
		t.Fatalf("artifacts in %s: %v\n%s", out, qcows, res.Stderr)
	}
	image := qcows[0]

	// The cluster as a user creates it: `manifests`, applied to the real management side, which
	// the test serves as CAPO would (see controlPlaneEndpoint).
	key, pub := standin.TestUserKey(t)
	manifest := filepath.Join(dir, "cluster.yaml")
	flavor := map[string]string{"sysext": "sysext-baked", "packer": "baked"}[method]
	testutil.Run(t, append([]string{"manifests", "--flavor", flavor, "--capi-api", "v1beta2", "--output-file", manifest, "--image-name",
		strings.TrimSuffix(filepath.Base(image), ".qcow2")}, capitest.ManifestSets("proof", kubetest.RealVersion)...)...).MustSucceed(t)
	cpMachine := proofMachine{name: "proof-control-plane-0", ip: controlPlaneIP, mac: "52:54:00:26:00:10", uuid: "6f1d2c3e-0000-4000-8000-000000000026"}
	workerMachine := proofMachine{name: "proof-md-0-worker", ip: workerIP, mac: "52:54:00:26:00:11", uuid: "6f1d2c3e-0000-4000-8000-000000000027"}
	cpSpecs, workerSpecs := userSpecs(pub, cpMachine), userSpecs(pub, workerMachine)
	faults := map[string]bool{}
	for _, f := range strings.Fields(os.Getenv("NODE_PROOF_FAULT")) {
		switch f {
		case "init":
			cpSpecs.PreKubeadmCommands = []string{kubeadmFault(initFault)}
		case "join":
			workerSpecs.PreKubeadmCommands = []string{kubeadmFault(joinFault)}
		default:
			t.Fatalf("NODE_PROOF_FAULT=%q: want init, join or both", f)
		}
		faults[f] = true
	}
	if err := capitest.AddToSpecs(manifest, cpSpecs, workerSpecs); err != nil {
		t.Fatal(err)
	}
	apiPort, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mgmt := capitest.Start(t, capitest.Options{Pairing: proofPairing, Providers: []string{capitest.Core, capitest.Bootstrap, capitest.ControlPlane},
		InfrastructureCRDs: true, Routes: map[string]string{controlPlaneEndpoint: fmt.Sprintf("127.0.0.1:%d", apiPort)}})
	step("management side started (" + proofPairing.String() + ")")
	cluster := mgmt.CreateCluster(t, manifest, controlPlaneEndpoint)
	cpm := cluster.BootstrapData(t, true, 5*time.Minute)
	step("the control plane's bootstrap data Secret (CABPK) after the cluster was applied")
	cp := proofNode(t, cpm.UserData, dir, image, key, cpMachine)
	workerBoot := proofNode(t, nil, dir, image, key, workerMachine)
	step("disks converted, the control plane's config drive written")

	peerPort, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pullsBefore := reg.PullRequests()
	g := standin.Boot(t, cp.raw, standin.BootOptions{ConfigDrive: cp.drive, Key: cp.key, Timeout: 15 * time.Minute, Memory: 3072, CPUs: 2,
		Isolated: true, Peer: &standin.PeerNet{Port: peerPort, Listen: true, MAC: cp.mac}, Forwards: []standin.Forward{{Host: apiPort, Guest: 6443}}})
	cluster.Provision(t, cpm, "openstack:///"+cp.uuid, cp.ip)
	step("boot to SSH")
	ssh := quietSSH(g)
	kubectl := "sudo " + nodePath + "kubectl --kubeconfig /etc/kubernetes/admin.conf "
	waitBootstrap(t, g, 40*time.Minute)
	step("kubeadm init (by kubeadm.service, " + kubeadmRuns(g) + ")")
	if faults["init"] {
		checkRetried(t, g, "init", initFault)
	}
	// CABPK writes the worker's bootstrap data once KCP saw the control plane initialized (the
	// workload cluster's kubeadm-config, read at the endpoint) and CABPK made its bootstrap token
	// there: the worker boots now, beside the control plane's start.
	wm := cluster.BootstrapData(t, false, 10*time.Minute)
	step("the worker's bootstrap data Secret (CABPK: a bootstrap token made in the workload cluster)")
	workerBoot.writeDrive(t, wm.UserData)
	workerBooted := bootWorker(t, workerBoot, peerPort)
	cluster.Provision(t, wm, "openstack:///"+workerBoot.uuid, workerBoot.ip)
	// kubelet collects images every 5 minutes (its first pass at start finds no image stats yet),
	// so the forced pass is set up now: it comes during the Ready wait and the join, and is
	// checked after them.
	crictl := "sudo " + registrytest.CrictlInGuest + " --runtime-endpoint unix:///run/containerd/containerd.sock "
	gcStarted := startImageGC(t, g)
	step("image GC forced (an unpinned image imported, thresholds 1/0 %, kubelet restarted)")
	// The cloud controller manager (OCCM on OpenStack) clears the uninitialized taint that
	// kubelet's --cloud-provider=external sets; there is no cloud here, so the proof does it.
	ssh(kubectl + "taint nodes --all node.cloudprovider.kubernetes.io/uninitialized- 2>&1")
	want := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kube-proxy", "coredns"}
	var nodes, pods string
	for deadline := time.Now().Add(20 * time.Minute); ; {
		nodes = ssh(kubectl + "get nodes --no-headers")
		pods = ssh(kubectl + "get pods -n kube-system --no-headers")
		if strings.Contains(nodes, " Ready ") && allRunning(pods, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not become Ready with every kube-system pod Running:\n%s\n%s\n%s", nodes, pods,
				ssh(kubectl+"describe pods -n kube-system | tail -60; sudo journalctl -b --no-pager -u kubelet.service | tail -40"))
		}
		time.Sleep(20 * time.Second)
	}
	step("node Ready, kube-system Running")
	// The worker joins before the evidence is printed, so it shows both nodes (or why not).
	worker, joinErr := joinWorker(t, g, workerBoot, <-workerBooted, step)
	if joinErr == nil && faults["join"] {
		checkRetried(t, worker, "join", joinFault)
	}
	if joinErr == nil {
		// The management side found both Nodes by their provider IDs, through the
		// <cluster>-kubeconfig Secret at the endpoint.
		for _, m := range []capitest.Machine{cpm, wm} {
			t.Logf("Machine %s: Node %s", m.Name, cluster.WaitNodeRef(t, m, 5*time.Minute))
		}
		step("both Machines have their Node (CAPI's view of the workload cluster)")
	}
	pulls := reg.PullRequests() - pullsBefore
	fmt.Printf("NODE-PROOF-BEGIN %s\n", method)
	fmt.Println(retrySSH(g, kubectl+"get nodes -o wide"))
	fmt.Println(retrySSH(g, kubectl+"get pods -A -o wide"))
	fmt.Println("control plane: " + ssh(nodePath+"kubelet --version"))
	if worker != nil {
		fmt.Println("worker: " + quietSSH(worker)(nodePath+"kubelet --version"))
	}
	fmt.Printf("registry pulls during boot: %d\n", pulls)
	fmt.Printf("NODE-PROOF-END %s\n", method)
	if joinErr != nil {
		t.Error(joinErr)
	}

	if pulls != 0 {
		t.Errorf("the registry saw %d manifest/blob requests during the boots, want 0", pulls)
	}
	if v := ssh(nodePath + "kubelet --version"); v != "Kubernetes "+kubetest.RealVersion {
		t.Errorf("kubelet --version %q, want the baked-in %s", v, kubetest.RealVersion)
	}
	// containerd's images are the preloaded ones, pinned, under kubeadm's names.
	var list struct {
		Images []struct {
			RepoTags []string `json:"repoTags"`
			Pinned   bool     `json:"pinned"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(ssh(crictl+"images -o json")), &list); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, im := range list.Images {
		for _, tag := range im.RepoTags {
			have[tag] = im.Pinned
		}
	}
	for _, ref := range pushed.Refs {
		if pinned, ok := have[ref]; !ok || !pinned {
			t.Errorf("containerd lacks %s or it is not pinned (present %v)", ref, ok)
		}
	}
	if t.Failed() {
		return
	}
	checkImageGC(t, g, pushed.Refs, crictl, gcStarted, step)
}

// The proof's tenant network, which the two guests share only with each other (standin.PeerNet):
// its default route makes kubeadm advertise, and kubelet report, these addresses.
const (
	controlPlaneIP = "10.26.0.10"
	workerIP       = "10.26.0.11"
)

// controlPlaneEndpoint is the cluster's API endpoint, the same address for all three who use it,
// as CAPO with the API load balancer off gives the first control-plane server's: the worker
// reaches it on the tenant network, the control plane is it (kubeadm puts it in the API
// server's certificate: controlPlaneEndpoint and advertise address), and the management side
// (CAPI's cluster cache, KCP, CABPK's token) reaches it as through a bastion: an HTTPS_PROXY
// CONNECT tunnel (capitest.Options.Routes) into the control plane's hostfwd of port 6443, TLS
// end to end and checked against this address. Not 127.0.0.1: that is each guest's own.
const controlPlaneEndpoint = controlPlaneIP + ":6443"

// proofPairing is the management side's: CAPI v1.12.10, CAPO v0.14.7's tested pairing (its
// go.mod pins it; the admission test admits the v1beta2 defaults with it too). CAPI v1.12
// supports workload clusters of Kubernetes v1.29-v1.35 (the guest's is v1.34.4) on a management
// cluster of v1.31-v1.35 (capitest's kube-apiserver is the same v1.34.4 build): the core
// provider's matrix in its docs/book/src/reference/versions.md.
var proofPairing = capitest.Pairings[0]

// nodePath runs a command with both methods' binary dirs on PATH (the packer method's are in
// /opt/bin, which neither sshd's nor sudo's secure_path has).
const nodePath = "env PATH=/usr/sbin:/usr/bin:/sbin:/bin:/opt/bin "

// proofMachine is one Nova server of the proof: its name, tenant address and port MAC.
type proofMachine struct{ name, ip, mac, uuid string }

// proofBoot is what a machine boots: its disk, its config drive and the SSH key of its user.
type proofBoot struct {
	proofMachine
	raw, drive, key string
}

// userSpecs are what a user of this proof adds to the KubeadmConfigSpec of m: a login, a CNI
// configuration, and the network config Nova's ports would give (static: the guest-only network
// has no DHCP).
func userSpecs(pub string, m proofMachine) capitest.Additions {
	return capitest.Additions{Users: []capitest.User{{Name: standin.TestUserName, SSHKey: pub, Groups: "sudo"}}, Files: map[string]string{
		"/etc/cni/net.d/10-node-proof.conflist": capitest.BridgeCNI,
		// The tenant port: static, the default route.
		"/etc/systemd/network/05-tenant.network": "[Match]\nMACAddress=" + m.mac + "\n\n[Network]\nAddress=" + m.ip +
			"/24\n\n[Route]\nGateway=10.26.0.1\nGatewayOnLink=yes\n",
		// SSH's way in (QEMU's user network): DHCP, and no default route of its own.
		"/etc/systemd/network/04-ssh.network": "[Match]\nMACAddress=" + standin.UserNetMAC + "\n\n[Network]\nDHCP=yes\n",
	}}
}

// proofNode converts m's own disk from the built image and, when userData is given (CABPK's
// bootstrap data Secret), writes its config drive as Nova gives it.
func proofNode(t *testing.T, userData []byte, dir, image, key string, m proofMachine) proofBoot {
	t.Helper()
	b := proofBoot{proofMachine: m, key: key, drive: filepath.Join(dir, m.name+"-config-2.iso"), raw: filepath.Join(dir, m.name+".raw")}
	testutil.Run(t, "convert", image, b.raw).MustSucceed(t)
	fi, err := os.Stat(b.raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(b.raw, fi.Size()+6<<30); err != nil { // room for etcd and the unpacked images
		t.Fatal(err)
	}
	if userData != nil {
		b.writeDrive(t, userData)
	}
	return b
}

// writeDrive writes b's config drive: the bootstrap data as its user data, Nova's metadata.
func (b proofBoot) writeDrive(t *testing.T, userData []byte) {
	t.Helper()
	if err := configdrive.Write(b.drive, userData, configdrive.MetaData{UUID: b.uuid, Name: b.name, Hostname: b.name + ".novalocal"}); err != nil {
		t.Fatal(err)
	}
}

// quietSSH runs a command in g and returns its trimmed output, errors included in it.
func quietSSH(g *standin.Guest) func(string) string {
	return func(cmd string) string {
		got, _ := g.SSH(cmd)
		return strings.TrimSpace(got)
	}
}

// retrySSH runs cmd until it succeeds (an API server under a TCG load can time a request out),
// at most 5 times, and returns its last output.
func retrySSH(g *standin.Guest, cmd string) string {
	var got string
	for i := 0; i < 5; i++ {
		var err error
		if got, err = g.SSH(cmd); err == nil {
			break
		}
		time.Sleep(15 * time.Second)
	}
	return strings.TrimSpace(got)
}

// waitBootstrap waits for CABPK's success marker: kubeadm.service runs by itself (Ignition
// enabled it; its drop-ins order it after containerd and coreos-metadata).
func waitBootstrap(t *testing.T, g *standin.Guest, timeout time.Duration) {
	t.Helper()
	ssh := quietSSH(g)
	for deadline := time.Now().Add(timeout); ; {
		state := ssh("test -e /run/cluster-api/bootstrap-success.complete && echo done || systemctl show -p ActiveState --value kubeadm.service")
		if state == "done" {
			return
		}
		if state == "failed" || time.Now().After(deadline) {
			t.Fatalf("kubeadm.service %s:\n%s\n%s", state, ssh("sudo journalctl -b --no-pager -u kubeadm.service | tail -80"),
				ssh("sudo journalctl -b --no-pager -u kubelet.service | tail -40"))
		}
		time.Sleep(20 * time.Second)
	}
}

// NODE_PROOF_FAULT's faults: the first kubeadm init (join) of the control plane (worker) gets a
// 1 s timeout, so it fails after writing its files and starting the kubelet (and the init its
// static pods), as a slow first boot's does at 1200 s. Each names the kubeadm.yml timeout it
// cuts and the phase that then fails.
var (
	initFault = fault{timeout: "controlPlaneComponentHealthCheck", phase: "wait-control-plane"}
	joinFault = fault{timeout: "kubeletHealthCheck", phase: "kubelet-wait-bootstrap"} // kubeadm v1.34: after kubelet-start
)

type fault struct{ timeout, phase string }

// kubeadmFault is f's preKubeadmCommand: the first run cuts the timeout; later runs put back the
// kubeadm.yml CABPK wrote.
func kubeadmFault(f fault) string {
	return "if [ -e /var/lib/node-proof-kubeadm.yml ]; then cp /var/lib/node-proof-kubeadm.yml /etc/kubeadm.yml; " +
		"else cp /etc/kubeadm.yml /var/lib/node-proof-kubeadm.yml && sed -i 's/" + f.timeout + ": .*/" + f.timeout + ": 1s/' /etc/kubeadm.yml; fi"
}

// checkRetried: under f the first kubeadm failed in its phase and the kubeadm.service drop-in
// reset the node before the run that succeeded.
func checkRetried(t *testing.T, g *standin.Guest, name string, f fault) {
	t.Helper()
	journal := quietSSH(g)("sudo journalctl -b --no-pager -u kubeadm.service")
	runs := quietSSH(g)("systemctl show -p NRestarts --value kubeadm.service")
	for _, want := range []string{"error execution phase " + f.phase, "[reset] Deleting contents of directories"} {
		if !strings.Contains(journal, want) || runs == "0" {
			t.Fatalf("NODE_PROOF_FAULT=%s did not fail the first kubeadm %s and reset the node (%s restarts, no %q):\n%s", name, name, runs, want, journal)
		}
	}
	fmt.Printf("NODE_PROOF_FAULT=%s: the first kubeadm %s failed in %s; kubeadm.service reset the node and ran %s more time(s):\n%s\n", name, name, f.phase, runs,
		quietSSH(g)("sudo journalctl -b --no-pager -u kubeadm.service | grep -E 'error execution phase|kubeadm reset|\\[reset\\] Deleting|initialized successfully|has joined|Started|Failed|Scheduled restart'"))
}

// kubeadmRuns says how many times kubeadm.service ran (its drop-in runs a failed kubeadm again).
func kubeadmRuns(g *standin.Guest) string {
	n := quietSSH(g)("systemctl show -p NRestarts --value kubeadm.service")
	if k, err := strconv.Atoi(n); err == nil {
		return fmt.Sprintf("%d run(s)", k+1)
	}
	return "runs unknown: " + n
}

// booted is a guest started in the background, when it answered SSH (or why it did not).
type booted struct {
	g    *standin.Guest
	err  error
	took time.Duration
}

// bootWorker starts a second guest from the same image with the worker's bootstrap data (CABPK's
// join: a bootstrap token and the CA hash of the first) in the background; the channel says when it answers SSH.
// The test's cleanup waits for the start and stops the guest, however the test ends.
func bootWorker(t *testing.T, w proofBoot, peerPort int) <-chan booted {
	t.Helper()
	work, ready, finished := t.TempDir(), make(chan booted, 1), make(chan struct{})
	var b booted
	go func() {
		defer close(finished)
		start := time.Now()
		g, err := standin.Start(context.Background(), w.raw, work, standin.BootOptions{ConfigDrive: w.drive, Key: w.key,
			Timeout: 15 * time.Minute, Memory: 2048, CPUs: 1, Isolated: true, Peer: &standin.PeerNet{Port: peerPort, MAC: w.mac}})
		b = booted{g, err, time.Since(start)}
		ready <- b
	}()
	t.Cleanup(func() {
		<-finished
		if b.g != nil {
			b.g.Kill()
		}
	})
	return ready
}

// joinWorker waits for the worker bootWorker started: kubeadm join must run by itself and both
// nodes be Ready, seen from the control plane. The error says what did not happen.
func joinWorker(t *testing.T, cp *standin.Guest, w proofBoot, b booted, step func(string)) (*standin.Guest, error) {
	t.Helper()
	g := b.g
	if b.err != nil {
		return nil, fmt.Errorf("the worker did not boot to SSH: %w", b.err)
	}
	step(fmt.Sprintf("worker up (it answered SSH %.0f s after its start, beside the control plane)", b.took.Seconds()))
	ssh, wssh := quietSSH(cp), quietSSH(g)
	for deadline := time.Now().Add(30 * time.Minute); ; {
		state := wssh("test -e /run/cluster-api/bootstrap-success.complete && echo done || systemctl show -p ActiveState --value kubeadm.service")
		if state == "done" {
			break
		}
		if state == "failed" || time.Now().After(deadline) {
			return g, fmt.Errorf("the worker's kubeadm.service %s:\n%s", state, wssh("sudo journalctl -b --no-pager -u kubeadm.service | tail -60"))
		}
		time.Sleep(20 * time.Second)
	}
	step("kubeadm join (by kubeadm.service, " + kubeadmRuns(g) + ")")
	kubectl := "sudo " + nodePath + "kubectl --kubeconfig /etc/kubernetes/admin.conf "
	ssh(kubectl + "taint nodes --all node.cloudprovider.kubernetes.io/uninitialized- 2>&1")
	// Named from Nova's metadata (the templates' ${COREOS_OPENSTACK_HOSTNAME}, domain cut). No
	// addresses: with --cloud-provider=external the cloud controller manager sets them.
	for deadline := time.Now().Add(15 * time.Minute); ; {
		nodes := ssh(kubectl + "get nodes --no-headers")
		ready := map[string]bool{}
		for _, l := range strings.Split(nodes, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == "Ready" {
				ready[f[0]] = true
			}
		}
		// kube-proxy's DaemonSet pod on the worker runs from the worker's own preload.
		proxies := ssh(kubectl + "get pods -n kube-system -l k8s-app=kube-proxy --no-headers")
		if ready["proof-control-plane-0"] && ready[w.name] && strings.Count(proxies, " Running ") == 2 {
			break
		}
		if time.Now().After(deadline) {
			return g, fmt.Errorf("proof-control-plane-0 and %s not both Ready with kube-proxy Running in 15 min:\n%s\n%s\n%s", w.name, nodes, proxies,
				wssh("sudo journalctl -b --no-pager -u kubelet.service | tail -40"))
		}
		time.Sleep(20 * time.Second)
	}
	step("worker joined, both nodes Ready")
	return g, nil
}

// gcVictim is the unpinned, unused image the forced image GC must delete.
const gcVictim = "example.com/node-proof/unpinned:gc"

// startImageGC forces kubelet's image garbage collection on g (thresholds 1/0 %, no minimum
// age) with an unpinned, unused image beside the preloaded ones, and returns when it did so.
func startImageGC(t *testing.T, g *standin.Guest) time.Time {
	t.Helper()
	img, err := registrytest.Image{Arch: "amd64", Files: map[string][]byte{"gc-me": []byte("unpinned and unused\n")}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(gcVictim)
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		t.Fatal(err)
	}
	mustSSH(t, g, "echo "+base64.StdEncoding.EncodeToString(buf.Bytes())+" | base64 -d > /tmp/unpinned.tar && sudo ctr -n k8s.io images import /tmp/unpinned.tar")
	mustSSH(t, g, "sudo sed -i -e '/^imageGCHighThresholdPercent:/d' -e '/^imageGCLowThresholdPercent:/d' -e '/^imageMinimumGCAge:/d' /var/lib/kubelet/config.yaml && "+
		"printf 'imageGCHighThresholdPercent: 1\\nimageGCLowThresholdPercent: 0\\nimageMinimumGCAge: 0s\\n' | sudo tee -a /var/lib/kubelet/config.yaml >/dev/null && sudo systemctl restart kubelet")
	return time.Now()
}

// checkImageGC waits until kubelet's image GC (every 5 minutes, and once soon after its start)
// deleted the unpinned image, at most 12 min after startImageGC, and checks it kept the pinned.
func checkImageGC(t *testing.T, g *standin.Guest, refs []string, crictl string, started time.Time, step func(string)) {
	t.Helper()
	for deadline := started.Add(12 * time.Minute); ; {
		if !strings.Contains(mustSSH(t, g, crictl+"images"), "example.com/node-proof/unpinned") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubelet's image GC did not delete the unpinned image in 12 min:\n%s", mustSSH(t, g, "sudo journalctl -b --no-pager -u kubelet.service | grep -i -e 'garbage' -e 'image' | tail -20"))
		}
		time.Sleep(20 * time.Second)
	}
	left := mustSSH(t, g, crictl+"images")
	for _, ref := range refs {
		repo, tagName, _ := strings.Cut(ref, ":")
		if !strings.Contains(left, repo) || !strings.Contains(left, tagName) {
			t.Errorf("kubelet's image GC removed the pinned %s:\n%s", ref, left)
		}
	}
	step(fmt.Sprintf("image GC: the unpinned image deleted %.0f s after the forced start, the pinned kept", time.Since(started).Seconds()))
	fmt.Printf("image GC: unpinned %s deleted; %d pinned images kept\n", gcVictim, len(refs))
}

// mustSSH runs cmd in g and returns its trimmed output; an error fails the test.
func mustSSH(t *testing.T, g *standin.Guest, cmd string) string {
	t.Helper()
	got, err := g.SSH(cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, got)
	}
	return strings.TrimSpace(got)
}

// allRunning says whether every wanted pod name prefix has a pod and all are Running.
func allRunning(pods string, want []string) bool {
	seen := map[string]bool{}
	for _, l := range strings.Split(pods, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		for _, w := range want {
			if strings.HasPrefix(f[0], w) {
				if f[2] != "Running" {
					return false
				}
				seen[w] = true
			}
		}
	}
	return slices.IndexFunc(want, func(w string) bool { return !seen[w] }) < 0
}
