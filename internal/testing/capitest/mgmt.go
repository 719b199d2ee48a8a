package capitest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// The providers, by the name of their manager.
const (
	Core           = "capi"  // sigs.k8s.io/cluster-api
	Bootstrap      = "cabpk" // its bootstrap/kubeadm
	ControlPlane   = "kcp"   // its controlplane/kubeadm
	Infrastructure = "capo"  // sigs.k8s.io/cluster-api-provider-openstack
	// ORC is the OpenStack resource controller (github.com/k-orc/openstack-resource-controller),
	// which CAPO's docs require beside CAPO v0.12+: it resolves the ORC Images of --image-ref
	// orc (CAPO looks up image.filter and image.id in Glance itself). With it every ORC CRD is
	// installed (with Infrastructure or InfrastructureCRDs), not only the Image that CAPO's controllers watch.
	ORC = "orc"
)

// allProviders is every provider, in start order.
var allProviders = []string{Core, Bootstrap, ControlPlane, Infrastructure}

// provider is where a provider's manifests are (sub, under its module's build directory), the
// contract labels its kustomization puts on its CRDs, and the feature gates it runs with:
// KubeadmBootstrapFormatIgnition is clusterctl's EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true (no
// Ignition without it), ClusterTopology its CLUSTER_TOPOLOGY=true (no ClusterClass without it).
type provider struct {
	sub    string
	labels map[string]string
	gates  string
}

var providers = map[string]provider{
	Core:           {sub: ".", gates: "ClusterTopology=true"}, // core/ since v1.14: coreSub
	Bootstrap:      {sub: "bootstrap/kubeadm", labels: contract("v1beta1", "v1beta2"), gates: "KubeadmBootstrapFormatIgnition=true"},
	ControlPlane:   {sub: "controlplane/kubeadm", labels: contract("v1beta1", "v1beta2"), gates: "ClusterTopology=true,KubeadmBootstrapFormatIgnition=true"},
	Infrastructure: {sub: ".", labels: contract("v1beta1")},
}

// sub is where p's manifests are under root: the core's moved from the module root to core/
// in CAPI v1.14 (scripts/install-capi.sh copies them with their paths).
func (d dirs) sub(p string) (root, sub string) {
	if p == Infrastructure {
		return d.CAPO, providers[p].sub
	}
	if _, err := os.Stat(filepath.Join(d.CAPI, "core", "config")); p == Core && err == nil {
		return d.CAPI, "core"
	}
	return d.CAPI, providers[p].sub
}

func contract(versions ...string) map[string]string {
	l := map[string]string{}
	for _, v := range versions {
		l["cluster.x-k8s.io/"+v] = v
	}
	return l
}

// Options say what to start.
type Options struct {
	Pairing
	// Providers to run (nil: AllProviders). The core's CRDs are always installed; a provider's
	// CRDs and webhooks only when it runs (its conversion webhook is its manager).
	Providers []string
	// InfrastructureCRDs installs CAPO's (and ORC's Image) CRDs without running CAPO's manager:
	// the test plays the infrastructure provider (Workload.Provision).
	InfrastructureCRDs bool
	// Routes are addresses off this host (host:port, e.g. a workload cluster's API endpoint on a
	// guest-only network) that the managers reach as through a bastion, by the CONNECT proxy in
	// their HTTPS_PROXY: address -> the 127.0.0.1 address that leads there (a QEMU hostfwd).
	Routes map[string]string
	// Netns runs every process (and Kubectl) in this network namespace: see netns.go.
	Netns string
}

// Management is a running management side. Kubeconfig is the admin's (system:masters).
type Management struct {
	Pairing
	Dir, Kubeconfig string
	kubectl         string
	// Timings of the start-up steps, for the test's log and the figures.
	Timings []Timing
	procs   []*process
	client  *http.Client
	api     string
	proxy   string // the routes' proxy URL, when o.Routes
	netns   string // Options.Netns
}

// Timing is how long one step took.
type Timing struct {
	Step string
	Took time.Duration
}

type process struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Start starts the management side for o and stops it when the test ends (every process by
// its PID). Its logs and files stay in Dir when the test failed (the path is logged), else go.
func Start(t testing.TB, o Options) *Management {
	t.Helper()
	if o.Providers == nil {
		o.Providers = allProviders
	}
	kdir := kubetest.RealDir(t)
	need := o.Providers
	if o.InfrastructureCRDs && !slices.Contains(need, Infrastructure) {
		need = append(slices.Clone(need), crdsOnly)
	}
	d := buildDirs(t, o.Pairing, need)
	dir, err := os.MkdirTemp("", "capitest-")
	if err != nil {
		t.Fatal(err)
	}
	m := &Management{Pairing: o.Pairing, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), kubectl: filepath.Join(kdir, "kubectl"), netns: o.Netns}
	t.Cleanup(func() { m.stop(t) })
	if len(o.Routes) > 0 {
		p, err := startRoutes(t, o.Routes)
		if err != nil {
			t.Fatal(err)
		}
		m.proxy = p
	}
	if err := m.start(kdir, d, o); err != nil {
		t.Fatalf("the management side (%s): %v", o.Pairing, err)
	}
	for _, s := range m.Timings {
		t.Logf("management side %s: %s in %s", o.Pairing, s.Step, s.Took.Round(10*time.Millisecond))
	}
	return m
}

func (m *Management) start(kdir string, d dirs, o Options) error {
	step := time.Now()
	took := func(what string) {
		m.Timings = append(m.Timings, Timing{what, time.Since(step)})
		step = time.Now()
	}
	c, err := makeCerts(m.Dir)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	ports, err := freePorts(3+3*len(o.Providers), m.netns)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	ports = ports[3:]
	m.api = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: capitest, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: capitest, context: {cluster: capitest, user: admin}}]
current-context: capitest
`, m.api, c.CA, c.AdminCert, c.AdminKey)
	if err := os.WriteFile(m.Kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}
	if m.client, err = c.client(m.netns); err != nil {
		return err
	}
	etcd := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := m.run("etcd", filepath.Join(kdir, "etcd"), "--data-dir", filepath.Join(m.Dir, "etcd"), "--unsafe-no-fsync", "--log-level", "warn",
		"--listen-client-urls", etcd, "--advertise-client-urls", etcd, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer, "--listen-metrics-urls", ""); err != nil {
		return err
	}
	if err := m.run("kube-apiserver", filepath.Join(kdir, "kube-apiserver"), "--etcd-servers", etcd, "--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort), "--tls-cert-file", c.ServingCert,
		"--tls-private-key-file", c.ServingKey, "--client-ca-file", c.CA, "--authorization-mode", "RBAC",
		"--service-account-issuer", m.api, "--service-account-key-file", c.SAPub, "--service-account-signing-key-file", c.SAKey,
		"--service-cluster-ip-range", "10.96.0.0/24", "--profiling=false"); err != nil {
		return err
	}
	if err := m.waitHTTP("kube-apiserver", m.api+"/readyz", 4*time.Minute); err != nil {
		return err
	}
	took("kube-apiserver ready")

	// The CRDs: the core's always, a provider's when it runs; ORC's Image beside CAPO.
	type port struct{ webhook, health, diag int }
	pp := map[string]port{}
	for i, p := range o.Providers {
		pp[p] = port{ports[3*i], ports[3*i+1], ports[3*i+2]}
	}
	var crds []map[string]any
	add := func(root, sub string, labels map[string]string, webhook int, pattern string) error {
		files, err := filepath.Glob(filepath.Join(root, sub, "config", "crd", "bases", pattern))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no CRDs in %s (run scripts/install-capi.sh --force)", filepath.Join(root, sub, "config", "crd", "bases"))
		}
		docs, err := prepareCRDs(files, labels, webhook, c.caPEM)
		crds = append(crds, docs...)
		return err
	}
	if !slices.Contains(o.Providers, Core) {
		root, sub := d.sub(Core)
		if err := add(root, sub, nil, 0, "*.yaml"); err != nil {
			return err
		}
	}
	orcCRDs := "*_images.yaml" // CAPO's controllers watch ORC Images
	if slices.Contains(o.Providers, ORC) {
		orcCRDs = "*.yaml"
	}
	if o.InfrastructureCRDs && !slices.Contains(o.Providers, Infrastructure) {
		if err := add(d.ORC, ".", nil, 0, orcCRDs); err != nil {
			return err
		}
		root, sub := d.sub(Infrastructure)
		if err := add(root, sub, providers[Infrastructure].labels, 0, "*.yaml"); err != nil {
			return err
		}
	}
	for _, p := range o.Providers {
		if p == ORC {
			continue // its CRDs go with CAPO's
		}
		if p == Infrastructure {
			if err := add(d.ORC, ".", nil, 0, orcCRDs); err != nil {
				return err
			}
		}
		root, sub := d.sub(p)
		if err := add(root, sub, providers[p].labels, pp[p].webhook, "*.yaml"); err != nil {
			return err
		}
	}
	if err := m.applyDocs("crds.yaml", crds, "apply", "--server-side"); err != nil {
		return fmt.Errorf("the CRDs: %w", err)
	}
	if out, err := m.Kubectl("wait", "--for", "condition=established", "--timeout=240s", "crd", "--all"); err != nil {
		return fmt.Errorf("the CRDs are not established: %v: %s", err, out)
	}
	took(fmt.Sprintf("%d CRDs established", len(crds)))

	for _, p := range o.Providers {
		if p == ORC { // no webhooks, its own flags
			if err := m.run(p+"-manager", filepath.Join(d.ORC, p+"-manager"), "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", pp[p].health),
				"--metrics-bind-address", "0", "--leader-elect=false"); err != nil {
				return err
			}
			continue
		}
		bin := filepath.Join(d.CAPI, p+"-manager")
		if p == Infrastructure {
			bin = filepath.Join(d.CAPO, p+"-manager")
		}
		args := []string{"--webhook-port", fmt.Sprint(pp[p].webhook), "--webhook-cert-dir", c.WebhookDir,
			"--health-addr", fmt.Sprintf("127.0.0.1:%d", pp[p].health), "--diagnostics-address", fmt.Sprintf("127.0.0.1:%d", pp[p].diag),
			"--insecure-diagnostics", "--leader-elect=false"}
		if g := providers[p].gates; g != "" {
			args = append(args, "--feature-gates="+g)
		}
		if err := m.run(p+"-manager", bin, args...); err != nil {
			return err
		}
	}
	for _, p := range o.Providers {
		if err := m.waitHTTP(p+"-manager", fmt.Sprintf("http://127.0.0.1:%d/readyz", pp[p].health), 4*time.Minute); err != nil {
			return err
		}
	}
	took(fmt.Sprintf("%d managers ready", len(o.Providers)))

	// The admission webhooks, the probed provider's last: the API server reads the
	// configurations in the order they were written, so once the last one is in effect all are.
	order := slices.DeleteFunc(slices.Clone(o.Providers), func(p string) bool { return p == ORC })
	probe := ""
	for _, p := range []string{Core, ControlPlane} {
		if i := slices.Index(order, p); i >= 0 {
			order = append(slices.Delete(order, i, i+1), p)
			probe = p
		}
	}
	var hooks []map[string]any
	for _, p := range order {
		root, sub := d.sub(p)
		b, err := os.ReadFile(filepath.Join(root, sub, "config", "webhook", "manifests.yaml"))
		if err != nil {
			return err
		}
		docs, err := rewriteWebhooks(b, p, pp[p].webhook, c.caPEM)
		if err != nil {
			return fmt.Errorf("%s's webhooks: %w", p, err)
		}
		hooks = append(hooks, docs...)
	}
	if err := m.applyDocs("webhooks.yaml", hooks, "apply"); err != nil {
		return fmt.Errorf("the webhook configurations: %w", err)
	}
	if probe != "" {
		if err := m.probe(probe); err != nil {
			return err
		}
	}
	took("admission webhooks in effect")
	return nil
}

func (m *Management) String() string {
	return "the management side of CAPI " + m.CAPI + " and CAPO " + m.CAPO
}

// Kubectl runs kubectl against the management side; out is its combined output.
func (m *Management) Kubectl(args ...string) (string, error) {
	cmd := m.command(m.kubectl, append([]string{"--kubeconfig", m.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// applyDocs writes docs to file in Dir and runs kubectl VERB... -f on it.
func (m *Management) applyDocs(file string, docs []map[string]any, verb ...string) error {
	b, err := joinDocs(docs)
	if err != nil {
		return err
	}
	p := filepath.Join(m.Dir, file)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return err
	}
	if out, err := m.Kubectl(append(verb, "-f", p)...); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// probe waits until the webhooks of p are in effect: KCP's refuses a KubeadmControlPlane with
// an even replica count (stacked etcd), the core's defaulting gives a MachineDeployment its
// cluster-name label.
func (m *Management) probe(p string) error {
	doc, want := probeKCP, "even number"
	if p == Core {
		doc, want = probeMD, "cluster.x-k8s.io/cluster-name: probe"
	}
	f := filepath.Join(m.Dir, "probe-"+p+".yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		return err
	}
	var out string
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		out, _ = m.Kubectl("create", "--dry-run=server", "-o", "yaml", "-f", f)
		if strings.Contains(out, want) {
			return nil
		}
	}
	return fmt.Errorf("%s's admission webhooks are not in effect a minute after their configurations (a dry-run create said: %s)", p, out)
}

const probeKCP = `apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: probe, namespace: default}
spec:
  replicas: 2
  version: v1.34.4
  kubeadmConfigSpec: {}
  machineTemplate: {infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: OpenStackMachineTemplate, name: probe}}
`

const probeMD = `apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: probe, namespace: default}
spec:
  clusterName: probe
  selector: {matchLabels: {probe: "1"}}
  template:
    metadata: {labels: {probe: "1"}}
    spec:
      clusterName: probe
      bootstrap: {configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfigTemplate, name: probe}}
      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: OpenStackMachineTemplate, name: probe}
`

// run starts one process, its output in Dir/NAME.log.
func (m *Management) run(name, bin string, args ...string) error {
	log := filepath.Join(m.Dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := m.command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, m.Dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.Kubeconfig) // the managers' (controller-runtime's) client
	if m.proxy != "" {
		// client-go's transports (CAPI's cluster cache, KCP's etcd port-forward) honour it; the
		// management side's own 127.0.0.1 never goes through a proxy.
		cmd.Env = append(cmd.Env, "HTTPS_PROXY="+m.proxy, "NO_PROXY=127.0.0.1,localhost")
	}
	// Gone with the test binary, should it die before its cleanup. Pdeathsig follows the thread
	// that forks, so that goroutine keeps its thread until the process exits: the runtime may
	// otherwise end the thread (a goroutine that locked it, such as a namespace's dial, returns)
	// and the kernel kill the process then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, log: log, cmd: cmd, done: make(chan struct{})}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	m.procs = append(m.procs, p)
	return nil
}

// command is bin with args, run in the namespace when there is one (`ip netns exec` execs bin,
// so the PID is bin's).
func (m *Management) command(bin string, args ...string) *exec.Cmd {
	if m.netns == "" {
		return exec.Command(bin, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", m.netns, bin}, args...)...)
}

// waitHTTP waits until url answers 200, or the process behind it (name) exits.
func (m *Management) waitHTTP(name, url string, limit time.Duration) error {
	var p *process
	for _, q := range m.procs {
		if q.name == name {
			p = q
		}
	}
	var last error
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v): %s", name, p.cmd.ProcessState, lastLines(p.log, 5))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := m.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		cancel()
		last = err
	}
	return fmt.Errorf("%s is not ready after %s (%v): %s", name, limit, last, lastLines(p.log, 5))
}

// stop ends every process by its PID, the last started first; on failure it keeps Dir and logs
// the end of each process's log.
func (m *Management) stop(t testing.TB) {
	for i := len(m.procs) - 1; i >= 0; i-- {
		p := m.procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	if t.Failed() {
		for _, p := range m.procs {
			t.Logf("the end of %s:\n%s", p.log, lastLines(p.log, 15))
		}
		t.Logf("the management side's files and logs are kept in %s", m.Dir)
		return
	}
	os.RemoveAll(m.Dir)
}

// client trusts the CA and presents the admin certificate (the API server's /readyz; the
// managers' health endpoints are plain HTTP).
func (c *certs) client(ns string) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(c.AdminCert, c.AdminKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	return &http.Client{Transport: &http.Transport{DialContext: dialer(ns), DisableKeepAlives: ns != "",
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}, nil
}

// freePorts are n distinct free ports on 127.0.0.1, of ns too when there is one.
func freePorts(n int, ns string) ([]int, error) {
	var ports []int
	for len(ports) < n {
		p, err := testutil.FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) && (ns == "" || freeIn(ns, p)) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// lastLines is the last n lines of file.
func lastLines(file string, n int) string {
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
