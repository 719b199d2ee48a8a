package capo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	ignition "github.com/flatcar/ignition/config/v2_3"
	igntypes "github.com/flatcar/ignition/config/v2_3/types"
	"gopkg.in/yaml.v3"
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

// estimateUserData builds the Ignition config CABPK would generate for a bootstrap spec (its
// base config with users, files, commands, a kubeadm configuration of realistic size, control
// plane certificates, merged with additionalConfig) and returns the base64 size Nova sees.
// The base config is built directly with the transpiler's encoding (data URLs escaped as it
// does) rather than through CLC: translating and validating it costs milliseconds per
// document, too slow for linting thousands. additional may be nil. Files read from Secrets
// (contentFrom) are not counted.
func estimateUserData(b *bootstrapSpec, additional *igntypes.Config) (int, igntypes.Config, error) {
	cfg, err := baseIgnition(b)
	if err != nil {
		return 0, igntypes.Config{}, err
	}
	if additional != nil {
		cfg = ignition.Append(cfg, *additional)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return 0, igntypes.Config{}, err
	}
	return base64.StdEncoding.EncodedLen(len(raw)), cfg, nil
}

// baseIgnition is the Ignition config CABPK renders from a KubeadmConfigSpec before merging
// additionalConfig (bootstrap/kubeadm/internal/ignition/clc).
func baseIgnition(b *bootstrapSpec) (igntypes.Config, error) {
	cfg := igntypes.Config{Ignition: igntypes.Ignition{Version: igntypes.MaxVersion.String()}}
	for _, u := range getList(b.spec, "users") {
		name := getString(u, "name")
		user := igntypes.PasswdUser{Name: name, Gecos: getString(u, "gecos"), HomeDir: getString(u, "homeDir"),
			Shell: getString(u, "shell"), PrimaryGroup: getString(u, "primaryGroup")}
		if g := getString(u, "groups"); g != "" {
			for _, group := range strings.Split(g, ", ") {
				user.Groups = append(user.Groups, igntypes.Group(group))
			}
		}
		for _, k := range getList(u, "sshAuthorizedKeys") {
			user.SSHAuthorizedKeys = append(user.SSHAuthorizedKeys, igntypes.SSHAuthorizedKey(fmt.Sprint(k)))
		}
		if p := getString(u, "passwd"); p != "" {
			user.PasswordHash = &p
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, user)
		if sudo := getString(u, "sudo"); sudo != "" {
			cfg.Storage.Files = append(cfg.Storage.Files, ignFile("/etc/sudoers.d/"+name, name+" "+sudo+"\n"))
		}
	}
	for _, f := range getList(b.spec, "files") {
		content := getString(f, "content")
		if getString(f, "encoding") == "base64" {
			if dec, err := base64.StdEncoding.DecodeString(content); err == nil {
				content = string(dec)
			}
		}
		cfg.Storage.Files = append(cfg.Storage.Files, ignFile(getString(f, "path"), content))
	}
	script := "#!/bin/bash\nset -e\n" + strings.Join(getStrings(b.spec, "preKubeadmCommands"), "\n") +
		"\nkubeadm join --config /etc/kubeadm.yml\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\nmv /etc/kubeadm.yml /tmp/\n" +
		strings.Join(getStrings(b.spec, "postKubeadmCommands"), "\n") + "\n"
	cfg.Storage.Files = append(cfg.Storage.Files, ignFile("/etc/kubeadm.sh", script))
	kubeadm := map[string]any{}
	for _, c := range []string{"clusterConfiguration", "initConfiguration", "joinConfiguration"} {
		if v, ok := b.spec[c]; ok {
			kubeadm[c] = v
		}
	}
	kubeadmYAML, err := yaml.Marshal(kubeadm)
	if err != nil {
		return cfg, fmt.Errorf("encoding the kubeadm configuration: %w", err)
	}
	cfg.Storage.Files = append(cfg.Storage.Files, ignFile("/etc/kubeadm.yml", string(kubeadmYAML)+strings.Repeat("x", kubeadmYAMLOverhead)))
	if b.controlPlane {
		cfg.Storage.Files = append(cfg.Storage.Files, controlPlaneCertFiles()...)
	}
	enabled := true
	cfg.Systemd.Units = append(cfg.Systemd.Units, igntypes.Unit{Name: "kubeadm.service", Enabled: &enabled, Contents: kubeadmUnit})
	if servers := getList(b.spec, "ntp", "servers"); len(servers) > 0 {
		var conf strings.Builder
		for _, s := range servers {
			fmt.Fprintf(&conf, "server %v\n", s)
		}
		cfg.Storage.Files = append(cfg.Storage.Files, ignFile("/etc/ntp.conf", conf.String()))
		cfg.Systemd.Units = append(cfg.Systemd.Units, igntypes.Unit{Name: "ntpd.service", Enabled: &enabled})
	}
	return cfg, nil
}

// controlPlaneCertFiles are the same for every control plane: built once.
var controlPlaneCertFiles = sync.OnceValue(func() []igntypes.File {
	rng := rand.New(rand.NewPCG(1, 2))
	var files []igntypes.File
	for _, c := range controlPlaneCerts {
		files = append(files, ignFile(c.path, fakePEM(rng, c.size)))
	}
	return files
})

// ignFile is a file as the transpiler writes inline contents: a percent-escaped data URL.
func ignFile(path, content string) igntypes.File {
	mode := 0o600
	return igntypes.File{
		Node: igntypes.Node{Filesystem: "root", Path: path},
		FileEmbedded1: igntypes.FileEmbedded1{Mode: &mode,
			Contents: igntypes.FileContents{Source: "data:," + escapeDataURL(content)}},
	}
}

// escapeDataURL is dataurl.EscapeString (what the transpiler uses: RFC 2396 unreserved bytes
// kept, every other byte %XX) without its per-byte fmt call, which dominated lint time.
func escapeDataURL(s string) string {
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+len(s)/2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
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
