// Package cabpktest turns the bootstrap specs of a `flatcar-capo manifests` output into the
// Ignition a node gets on a real CAPI cluster, for boot proofs: what CABPK renders for
// `format: ignition` (its CLC template: kubeadm.sh, kubeadm.yml, kubeadm.service, the cluster
// certificates on a control plane, users and files, then additionalConfig transpiled and
// appended), with the values the management cluster fills in: controlPlaneEndpoint, the
// Cluster's networking, the Kubernetes version, a bootstrap token and the CA hash for a join.
package cabpktest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"time"

	ignition "github.com/flatcar/ignition/config/v2_3"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// kubeadmUnit is CABPK's kubeadm.service (bootstrap/kubeadm/internal/ignition/clc).
const kubeadmUnit = `[Unit]
Description=kubeadm
# Run only once. After successful run, this file is moved to /tmp/.
ConditionPathExists=/etc/kubeadm.yml
After=network.target
[Service]
# To not restart the unit when it exits, as it is expected.
Type=oneshot
ExecStart=/etc/kubeadm.sh
[Install]
WantedBy=multi-user.target
`

// Cluster is what the management cluster knows and puts into every node's bootstrap data.
type Cluster struct {
	Endpoint string // controlPlaneEndpoint, host:port (CAPO: the API load balancer or the first node)
	Token    string // a kubeadm bootstrap token, [a-z0-9]{6}.[a-z0-9]{16}
	// The cluster's certificate authorities and service-account key pair (PEM), as CAPI
	// generates them into Secrets and CABPK writes them to a control plane.
	CACert, CAKey, EtcdCACert, EtcdCAKey, FrontProxyCACert, FrontProxyCAKey, SAPub, SAKey string
}

// NewCluster makes a cluster's certificate authorities (RSA 2048, as CAPI) and a token.
func NewCluster(endpoint string) (*Cluster, error) {
	c := &Cluster{Endpoint: endpoint, Token: "abcdef.0123456789abcdef"}
	var err error
	if c.CACert, c.CAKey, err = newCA("kubernetes"); err != nil {
		return nil, err
	}
	if c.EtcdCACert, c.EtcdCAKey, err = newCA("etcd-ca"); err != nil {
		return nil, err
	}
	if c.FrontProxyCACert, c.FrontProxyCAKey, err = newCA("front-proxy-ca"); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	c.SAKey = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}))
	c.SAPub = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	return c, nil
}

func newCA(cn string) (certPEM, keyPEM string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})), nil
}

// CAHash is kubeadm's discovery hash of the cluster CA: sha256 of its SubjectPublicKeyInfo.
func (c *Cluster) CAHash() (string, error) {
	b, _ := pem.Decode([]byte(c.CACert))
	if b == nil {
		return "", fmt.Errorf("cabpktest: no CA certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(s[:]), nil
}

// User is an account CABPK creates from the spec's users (here: the proof's SSH login).
type User struct {
	Name, SSHKey string
	Groups       []string
}

// Node says which node's bootstrap data to render.
type Node struct {
	Manifest string // the full `flatcar-capo manifests` output, every variable set
	// ControlPlane: the KubeadmControlPlane's spec with `kubeadm init`; else the
	// KubeadmConfigTemplate's with `kubeadm join` as a worker.
	ControlPlane bool
	Users        []User
	// Files are added to the spec's own files (path -> content, mode 0644), as a user's
	// KubeadmConfigSpec.files: e.g. a CNI configuration.
	Files map[string]string
}

// Ignition renders n's bootstrap data for cluster c: Ignition 2.3 JSON, as CABPK gives CAPO.
func (c *Cluster) Ignition(n Node) ([]byte, error) {
	docs, err := decodeAll(n.Manifest)
	if err != nil {
		return nil, err
	}
	kind := "KubeadmConfigTemplate"
	if n.ControlPlane {
		kind = "KubeadmControlPlane"
	}
	var spec, clusterSpec map[string]any
	version := ""
	for _, d := range docs {
		switch d["kind"] {
		case kind:
			s := mapAt(d, "spec")
			if n.ControlPlane {
				version, _ = s["version"].(string)
				spec = mapAt(s, "kubeadmConfigSpec")
			} else {
				spec = mapAt(s, "template", "spec")
			}
		case "Cluster":
			clusterSpec = mapAt(d, "spec")
		case "MachineDeployment":
			if v, ok := mapAt(d, "spec", "template", "spec")["version"].(string); ok && !n.ControlPlane {
				version = v
			}
		}
	}
	if spec == nil {
		return nil, fmt.Errorf("cabpktest: no %s in the manifest", kind)
	}
	if f, _ := spec["format"].(string); f != "ignition" {
		return nil, fmt.Errorf("cabpktest: %s format %q, want ignition", kind, f)
	}
	kubeadmYAML, err := c.kubeadmConfig(spec, clusterSpec, version, n.ControlPlane)
	if err != nil {
		return nil, err
	}
	command := "kubeadm join --config /etc/kubeadm.yml"
	if n.ControlPlane {
		command = "kubeadm init --config /etc/kubeadm.yml"
	}
	script := "#!/bin/bash\nset -e\n" + strings.Join(stringsAt(spec, "preKubeadmCommands"), "\n") + "\n\n" + command +
		"\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\nmv /etc/kubeadm.yml /tmp/\n" +
		strings.Join(stringsAt(spec, "postKubeadmCommands"), "\n") + "\n"
	type file struct {
		Path     string `yaml:"path"`
		Mode     int    `yaml:"mode"`
		Contents struct {
			Inline string `yaml:"inline"`
		} `yaml:"contents"`
	}
	add := func(files *[]file, path string, mode int, content string) {
		f := file{Path: path, Mode: mode}
		f.Contents.Inline = content
		*files = append(*files, f)
	}
	var files []file
	for _, f := range listAt(spec, "files") {
		fm, _ := f.(map[string]any)
		p, _ := fm["path"].(string)
		content, _ := fm["content"].(string)
		add(&files, p, 0o644, content)
	}
	for p, content := range n.Files {
		add(&files, p, 0o644, content)
	}
	add(&files, "/etc/kubeadm.sh", 0o700, script)
	add(&files, "/etc/kubeadm.yml", 0o600, kubeadmYAML)
	if n.ControlPlane {
		for _, f := range []struct{ path, content string }{
			{"ca.crt", c.CACert}, {"ca.key", c.CAKey}, {"etcd/ca.crt", c.EtcdCACert}, {"etcd/ca.key", c.EtcdCAKey},
			{"front-proxy-ca.crt", c.FrontProxyCACert}, {"front-proxy-ca.key", c.FrontProxyCAKey}, {"sa.pub", c.SAPub}, {"sa.key", c.SAKey},
		} {
			mode := 0o600
			if strings.HasSuffix(f.path, ".crt") || strings.HasSuffix(f.path, ".pub") {
				mode = 0o640
			}
			add(&files, "/etc/kubernetes/pki/"+f.path, mode, f.content)
		}
	}
	type user struct {
		Name   string   `yaml:"name"`
		Keys   []string `yaml:"ssh_authorized_keys"`
		Groups []string `yaml:"groups,omitempty"`
	}
	var users []user
	for _, u := range n.Users {
		users = append(users, user{Name: u.Name, Keys: []string{u.SSHKey}, Groups: u.Groups})
	}
	clc := map[string]any{
		"storage": map[string]any{"files": files},
		"systemd": map[string]any{"units": []map[string]any{{"name": "kubeadm.service", "enabled": true, "contents": kubeadmUnit}}},
	}
	if len(users) > 0 {
		clc["passwd"] = map[string]any{"users": users}
	}
	src, err := yaml.Marshal(clc)
	if err != nil {
		return nil, err
	}
	base := capo.TranspileCLC(string(src))
	if base.Fatal {
		return nil, fmt.Errorf("cabpktest: CABPK's own CLC does not transpile: %v", base.Issues)
	}
	cfg := base.Ignition
	if extra, _ := mapAt(spec, "ignition", "containerLinuxConfig")["additionalConfig"].(string); extra != "" {
		add := capo.TranspileCLC(extra)
		if add.Fatal || len(add.Issues) > 0 {
			return nil, fmt.Errorf("cabpktest: the %s's additionalConfig: %v", kind, add.Issues)
		}
		cfg = ignition.Append(cfg, add.Ignition)
	}
	if err := capo.ValidateIgnition(cfg); err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

// kubeadmConfig is CABPK's /etc/kubeadm.yml: the spec's ClusterConfiguration and its
// Init- or JoinConfiguration as kubeadm v1beta4 (CAPI v1beta2 already uses its shapes), with
// what CAPI fills in.
func (c *Cluster) kubeadmConfig(spec, clusterSpec map[string]any, version string, init bool) (string, error) {
	out := []string{}
	marshal := func(m map[string]any) error {
		b, err := yaml.Marshal(m)
		out = append(out, "---\n"+string(b))
		return err
	}
	if init {
		cc := copyMap(mapAt(spec, "clusterConfiguration"))
		cc["apiVersion"], cc["kind"] = "kubeadm.k8s.io/v1beta4", "ClusterConfiguration"
		cc["kubernetesVersion"], cc["controlPlaneEndpoint"] = version, c.Endpoint
		net := copyMap(mapAt(cc, "networking"))
		if pods := listAt(mapAt(clusterSpec, "clusterNetwork", "pods"), "cidrBlocks"); len(pods) > 0 {
			net["podSubnet"] = fmt.Sprint(pods[0])
		}
		if d, ok := mapAt(clusterSpec, "clusterNetwork")["serviceDomain"].(string); ok {
			net["dnsDomain"] = d
		}
		cc["networking"] = net
		if err := marshal(cc); err != nil {
			return "", err
		}
		ic := copyMap(mapAt(spec, "initConfiguration"))
		ic["apiVersion"], ic["kind"] = "kubeadm.k8s.io/v1beta4", "InitConfiguration"
		kubeadmTimeouts(ic)
		ic["bootstrapTokens"] = []map[string]any{{"token": c.Token, "ttl": "24h0m0s",
			"groups": []string{"system:bootstrappers:kubeadm:default-node-token"}, "usages": []string{"signing", "authentication"}}}
		if err := marshal(ic); err != nil {
			return "", err
		}
		return strings.Join(out, ""), nil
	}
	hash, err := c.CAHash()
	if err != nil {
		return "", err
	}
	jc := copyMap(mapAt(spec, "joinConfiguration"))
	jc["apiVersion"], jc["kind"] = "kubeadm.k8s.io/v1beta4", "JoinConfiguration"
	kubeadmTimeouts(jc)
	jc["discovery"] = map[string]any{"bootstrapToken": map[string]any{"apiServerEndpoint": c.Endpoint, "token": c.Token,
		"caCertHashes": []string{hash}}}
	if err := marshal(jc); err != nil {
		return "", err
	}
	return strings.Join(out, ""), nil
}

// kubeadmTimeouts turns CAPI v1beta2's timeouts (controlPlaneComponentHealthCheckSeconds: 1200)
// into kubeadm v1beta4's (controlPlaneComponentHealthCheck: 1200s), as CABPK does.
func kubeadmTimeouts(cfg map[string]any) {
	in := mapAt(cfg, "timeouts")
	if len(in) == 0 {
		return
	}
	out := map[string]any{}
	for k, v := range in {
		out[strings.TrimSuffix(k, "Seconds")] = fmt.Sprintf("%vs", v)
	}
	cfg["timeouts"] = out
}

func decodeAll(manifest string) ([]map[string]any, error) {
	dec := yaml.NewDecoder(strings.NewReader(manifest))
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if err.Error() == "EOF" {
				return docs, nil
			}
			return nil, fmt.Errorf("cabpktest: the manifest: %w", err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

func mapAt(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, _ := m[p].(map[string]any)
		if next == nil {
			return map[string]any{}
		}
		m = next
	}
	return m
}

func listAt(m map[string]any, key string) []any { l, _ := m[key].([]any); return l }

func stringsAt(m map[string]any, key string) []string {
	var out []string
	for _, v := range listAt(m, key) {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ManifestSets are `manifests` flags that fill every clusterctl variable of the templates for
// a one-node proof cluster: the output is then what a management cluster holds.
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
