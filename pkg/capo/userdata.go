package capo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	ignition "github.com/flatcar/ignition/config/v2_3"
	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"gopkg.in/yaml.v3"
	kubeadmv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	cabpkignition "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"
	capicerts "sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
)

// userDataLimit is Nova's cap on user_data, which is measured after base64 encoding.
const userDataLimit = 65535

// kubeadmYAMLOverhead stands for what CABPK adds to the kubeadm configuration it writes
// (apiVersion/kind headers, controlPlaneEndpoint, bootstrap token, discovery CA hashes).
const kubeadmYAMLOverhead = 1536

// controlPlaneCerts are the files CABPK adds for a control plane node (the paths are CAPI's,
// from secret.NewCertificatesForInitialControlPlane), with typical PEM sizes for CAPI's RSA 2048
// certificate authorities: generating real keys would cost ~0.1 s per estimate.
var controlPlaneCerts = map[secret.Purpose][2]int{
	secret.ClusterCA: {1099, 1679}, secret.EtcdCA: {1099, 1679}, secret.FrontProxyCA: {1099, 1679},
	secret.ServiceAccount: {451, 1679},
}

// estimateUserData renders the Ignition config CABPK would generate for a bootstrap spec with
// CAPI's own renderer (sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition: users, files,
// commands, kubeadm.service, NTP, disks, a kubeadm configuration of realistic size, control plane
// certificates), merges additionalConfig as that renderer does (additional may be nil; it is
// translated once by the caller, as lint shares translations), and returns the base64 size Nova
// sees. Files read from Secrets (contentFrom) are not counted.
func estimateUserData(b *bootstrapSpec, additional *igntypes.Config) (int, igntypes.Config, error) {
	raw, err := renderUserData(b, nil)
	if err != nil {
		return 0, igntypes.Config{}, err
	}
	cfg, rep, err := ignition.Parse(raw)
	if err != nil {
		return 0, igntypes.Config{}, fmt.Errorf("reading CABPK's Ignition config: %v %s", err, rep.String())
	}
	if additional != nil {
		cfg = ignition.Append(cfg, *additional)
		if raw, err = json.Marshal(&cfg); err != nil {
			return 0, igntypes.Config{}, err
		}
	}
	return base64.StdEncoding.EncodedLen(len(raw)), cfg, nil
}

// renderUserData is CABPK's Ignition rendering of b's KubeadmConfigSpec (v1beta1 and v1beta2
// share the fields it reads) with ign as the spec's ignition settings: the first control plane
// node's (kubeadm init) for a control plane, a joining node's otherwise.
func renderUserData(b *bootstrapSpec, ign *kubeadmv1beta2.IgnitionSpec) ([]byte, error) {
	var spec kubeadmv1beta2.KubeadmConfigSpec
	subset := map[string]any{}
	for _, k := range []string{"files", "users", "ntp", "diskSetup", "mounts", "bootCommands", "preKubeadmCommands", "postKubeadmCommands"} {
		if v, ok := b.spec[k]; ok {
			subset[k] = v
		}
	}
	raw, err := json.Marshal(subset)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("reading the KubeadmConfigSpec: %w", err)
	}
	// CABPK refuses a file without permissions (lint's cabpk-render says so): the estimate
	// counts the config as it is once fixed, with the transpiler's default mode.
	for i := range spec.Files {
		if spec.Files[i].Permissions == "" {
			spec.Files[i].Permissions = "0644"
		}
	}
	base := cloudinit.BaseUserData{BootCommands: spec.BootCommands, PreKubeadmCommands: spec.PreKubeadmCommands,
		PostKubeadmCommands: spec.PostKubeadmCommands, AdditionalFiles: spec.Files, Users: spec.Users,
		ControlPlane: b.controlPlane}
	if spec.NTP.IsDefined() {
		base.NTP = &spec.NTP
	}
	if spec.DiskSetup.IsDefined() {
		base.DiskSetup = &spec.DiskSetup
	}
	base.Mounts = spec.Mounts
	kubeadmYAML := func(c string, overhead int) (string, error) {
		y, err := yaml.Marshal(b.spec[c])
		return string(y) + strings.Repeat("x", overhead), err
	}
	if b.controlPlane {
		cluster, err := kubeadmYAML("clusterConfiguration", kubeadmYAMLOverhead)
		if err != nil {
			return nil, err
		}
		init, err := kubeadmYAML("initConfiguration", 0)
		if err != nil {
			return nil, err
		}
		out, _, err := cabpkignition.NewInitControlPlane(&cabpkignition.ControlPlaneInput{Ignition: ign,
			ControlPlaneInput: &cloudinit.ControlPlaneInput{BaseUserData: base, Certificates: controlPlaneCertificates(),
				ClusterConfiguration: cluster, InitConfiguration: init}})
		return out, err
	}
	join, err := kubeadmYAML("joinConfiguration", kubeadmYAMLOverhead)
	if err != nil {
		return nil, err
	}
	out, _, err := cabpkignition.NewNode(&cabpkignition.NodeInput{Ignition: ign,
		NodeInput: &cloudinit.NodeInput{BaseUserData: base, JoinConfiguration: join}})
	return out, err
}

// controlPlaneCertificates are CAPI's certificates of a first control plane node with fake PEM
// contents of realistic sizes, the same for every estimate.
func controlPlaneCertificates() secret.Certificates {
	certs := secret.NewCertificatesForInitialControlPlane(&kubeadmv1beta2.ClusterConfiguration{})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range certs {
		if size, ok := controlPlaneCerts[c.Purpose]; ok {
			c.KeyPair = &capicerts.KeyPair{Cert: []byte(fakePEM(rng, size[0])), Key: []byte(fakePEM(rng, size[1]))}
		}
	}
	return certs
}

// fakePEM returns size bytes shaped like a PEM block (random base64 in 64-column lines), which
// percent-encodes in a data URL the way a real key does.
func fakePEM(rng *rand.Rand, size int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		if i > 0 && i%64 == 0 {
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}
