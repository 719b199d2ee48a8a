package capo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	ignition "github.com/flatcar/ignition/config/v2_3"
	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"sigs.k8s.io/yaml"
)

// UserDataLimit is Nova's cap on user_data, which is measured after base64 encoding.
const UserDataLimit = 65535

// kubeadmYAMLOverhead stands for what CABPK adds to the kubeadm configuration it writes
// (apiVersion/kind headers, controlPlaneEndpoint, bootstrap token, discovery CA hashes).
const kubeadmYAMLOverhead = 1536

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

// controlPlaneCerts are the files CABPK adds for a control plane node, with typical PEM sizes
// for CAPI's RSA 2048 certificate authorities.
var controlPlaneCerts = []struct {
	path string
	size int
}{
	{"/etc/kubernetes/pki/ca.crt", 1099}, {"/etc/kubernetes/pki/ca.key", 1679},
	{"/etc/kubernetes/pki/etcd/ca.crt", 1099}, {"/etc/kubernetes/pki/etcd/ca.key", 1679},
	{"/etc/kubernetes/pki/front-proxy-ca.crt", 1099}, {"/etc/kubernetes/pki/front-proxy-ca.key", 1679},
	{"/etc/kubernetes/pki/sa.pub", 451}, {"/etc/kubernetes/pki/sa.key", 1679},
}

// EstimateUserData builds the Ignition config CABPK would generate for a bootstrap spec (its
// base config with users, files, commands, a kubeadm configuration of realistic size, control
// plane certificates, merged with additionalConfig) and returns the base64 size Nova sees.
// additional may be nil. Files read from Secrets (contentFrom) are not counted.
func estimateUserData(b *bootstrapSpec, additional *igntypes.Config) (int, igntypes.Config, error) {
	base, err := baseCLC(b)
	if err != nil {
		return 0, igntypes.Config{}, err
	}
	res := TranspileCLC(string(base))
	if res.Fatal {
		return 0, igntypes.Config{}, fmt.Errorf("the bootstrap spec does not translate to Ignition: %v", res.Issues)
	}
	cfg := res.Ignition
	if additional != nil {
		cfg = ignition.Append(cfg, *additional)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return 0, igntypes.Config{}, err
	}
	return base64.StdEncoding.EncodedLen(len(raw)), cfg, nil
}

// baseCLC writes the Container Linux Config CABPK renders from a KubeadmConfigSpec.
func baseCLC(b *bootstrapSpec) ([]byte, error) {
	var users, files []any
	for _, u := range getList(b.spec, "users") {
		name := getString(u, "name")
		user := map[string]any{"name": name}
		if g := getString(u, "groups"); g != "" {
			user["groups"] = strings.Split(g, ", ")
		}
		if keys := getList(u, "sshAuthorizedKeys"); len(keys) > 0 {
			user["ssh_authorized_keys"] = keys
		}
		for from, to := range map[string]string{"gecos": "gecos", "homeDir": "home_dir", "shell": "shell",
			"passwd": "password_hash", "primaryGroup": "primary_group"} {
			if v := getString(u, from); v != "" {
				user[to] = v
			}
		}
		users = append(users, user)
		if sudo := getString(u, "sudo"); sudo != "" {
			files = append(files, clcFile("/etc/sudoers.d/"+name, name+" "+sudo+"\n"))
		}
	}
	for _, f := range getList(b.spec, "files") {
		content := getString(f, "content")
		if getString(f, "encoding") == "base64" {
			if dec, err := base64.StdEncoding.DecodeString(content); err == nil {
				content = string(dec)
			}
		}
		files = append(files, clcFile(getString(f, "path"), content))
	}
	script := "#!/bin/bash\nset -e\n" + strings.Join(b.commands("preKubeadmCommands"), "\n") +
		"\nkubeadm join --config /etc/kubeadm.yml\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\nmv /etc/kubeadm.yml /tmp/\n" +
		strings.Join(b.commands("postKubeadmCommands"), "\n") + "\n"
	files = append(files, clcFile("/etc/kubeadm.sh", script))
	kubeadm := map[string]any{}
	for _, c := range []string{"clusterConfiguration", "initConfiguration", "joinConfiguration"} {
		if v, ok := b.spec[c]; ok {
			kubeadm[c] = v
		}
	}
	kubeadmYAML, err := yaml.Marshal(kubeadm)
	if err != nil {
		return nil, err
	}
	files = append(files, clcFile("/etc/kubeadm.yml", string(kubeadmYAML)+strings.Repeat("x", kubeadmYAMLOverhead)))
	if b.controlPlane {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, c := range controlPlaneCerts {
			files = append(files, clcFile(c.path, fakePEM(rng, c.size)))
		}
	}
	units := []any{map[string]any{"name": "kubeadm.service", "enabled": true, "contents": kubeadmUnit}}
	if servers := getList(b.spec, "ntp", "servers"); len(servers) > 0 {
		var conf strings.Builder
		for _, s := range servers {
			fmt.Fprintf(&conf, "server %v\n", s)
		}
		files = append(files, clcFile("/etc/ntp.conf", conf.String()))
		units = append(units, map[string]any{"name": "ntpd.service", "enabled": true})
	}
	clc := map[string]any{"systemd": map[string]any{"units": units}, "storage": map[string]any{"files": files}}
	if len(users) > 0 {
		clc["passwd"] = map[string]any{"users": users}
	}
	return yaml.Marshal(clc)
}

func clcFile(path, content string) map[string]any {
	return map[string]any{"path": path, "mode": 0o600,
		"contents": map[string]any{"inline": content}}
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
