package capo

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// NodeTrust is what a node needs at first boot to reach private mirrors: a CA (manifests
// --ca-file) and a proxy (--http-proxy, --https-proxy, --no-proxy).
type NodeTrust struct {
	CAPEM      []byte
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string
}

// Where the node gets them (Ignition writes them before any unit starts).
const (
	NodeCAFile       = "/etc/ssl/certs/flatcar-capo-ca.pem" // Flatcar's trust store (curl, Go, containerd)
	NodeProxyEnvFile = "/etc/flatcar-capo/proxy.env"        // root-only: the proxy URL may carry a password
)

// proxyUnits are the units that download after boot: the registry pulls, kubelet's, and the
// sysext flavors' systemd-sysupdate.
var proxyUnits = []string{"containerd.service", "kubelet.service", "systemd-sysupdate.service"}

func (n NodeTrust) empty() bool { return len(n.CAPEM) == 0 && n.HTTPProxy == "" && n.HTTPSProxy == "" }

// Warnings are what a user must know about the settings: Ignition spec 2.3 (what CABPK emits)
// has no proxy, and a password in a proxy URL is in the user-data.
func (n NodeTrust) Warnings(flavor string) []string {
	var w []string
	if n.HTTPProxy == "" && n.HTTPSProxy == "" {
		return nil
	}
	if flavor == FlavorSysext {
		w = append(w, "Ignition spec 2.3 (what CAPI's kubeadm bootstrap emits) has no proxy setting: the first-boot download of the Kubernetes sysext goes to "+VarSysextURL+" directly, so serve it from a mirror the nodes reach without the proxy (the proxy applies to containerd, kubelet and systemd-sysupdate after boot)")
	}
	if images.ProxyHasPassword(n.HTTPProxy) || images.ProxyHasPassword(n.HTTPSProxy) {
		w = append(w, "the proxy URL carries a password: it is in the bootstrap user-data (a Secret, readable through the Nova metadata service by the node) and in "+NodeProxyEnvFile+" (root-only) on every node")
	}
	if n.NoProxy == "" {
		w = append(w, "NO_PROXY holds only "+images.NoProxyList("")+": add the API server and its load balancer, the node subnet, the service and pod CIDRs and .svc,.cluster.local with --no-proxy")
	}
	return w
}

// edit adds the CA (Ignition's own certificateAuthorities, for its downloads, and the trust
// store) and the proxy environment of proxyUnits to a flavor's additionalConfig (CLC).
func (n NodeTrust) edit(clc string) (string, error) {
	var files, units strings.Builder
	head := ""
	if len(n.CAPEM) > 0 {
		head = "ignition:\n  security:\n    tls:\n      certificate_authorities:\n      - source: \"data:;base64," + base64.StdEncoding.EncodeToString(n.CAPEM) + "\"\n"
		files.WriteString(inlineFile(NodeCAFile, string(n.CAPEM)))
	}
	if n.HTTPProxy != "" || n.HTTPSProxy != "" {
		var env strings.Builder
		env.WriteString("# flatcar-capo manifests: --http-proxy, --https-proxy, --no-proxy\n")
		for _, kv := range []struct{ k, v string }{{"HTTP_PROXY", n.HTTPProxy}, {"HTTPS_PROXY", n.HTTPSProxy}, {"NO_PROXY", images.NoProxyList(n.NoProxy)}} {
			if kv.v == "" {
				continue
			}
			v, err := images.EnvFileValue(kv.v)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&env, "%s=%s\n%s=%s\n", kv.k, v, strings.ToLower(kv.k), v)
		}
		files.WriteString(strings.Replace(inlineFile(NodeProxyEnvFile, env.String()), "    mode: 0644\n", "    mode: 0600\n", 1))
		dropIn := "    - name: 10-flatcar-capo-proxy.conf\n      contents: |\n        [Service]\n        EnvironmentFile=" + NodeProxyEnvFile + "\n"
		for _, u := range proxyUnits {
			// A unit the CLC lists already (sysupdate's) gets the drop-in there: one entry per unit.
			if have := "  - name: " + u + "\n    dropins:\n"; strings.Contains(clc, have) {
				clc = strings.Replace(clc, have, have+dropIn, 1)
				continue
			}
			fmt.Fprintf(&units, "  - name: %s\n    dropins:\n%s", u, dropIn)
		}
	}
	if files.Len() > 0 {
		const sec = "storage:\n  files:\n"
		if strings.HasPrefix(clc, "storage:\n") && !strings.HasPrefix(clc, sec) {
			return "", fmt.Errorf("embedded CLC: storage without files first")
		}
		clc = sec + files.String() + strings.TrimPrefix(clc, sec)
	}
	if units.Len() > 0 {
		const sec = "systemd:\n  units:\n"
		if !strings.Contains(clc, sec) {
			return "", fmt.Errorf("embedded CLC has no systemd units")
		}
		clc = strings.Replace(clc, sec, sec+units.String(), 1)
	}
	return head + clc, nil
}

// trustCLC is n.edit, or nil when there is nothing to add (the baked template stays as is).
func trustCLC(n NodeTrust) func(string) (string, error) {
	if n.empty() {
		return nil
	}
	return n.edit
}

// chainCLC applies the non-nil edits in order (nil when there are none).
func chainCLC(edits ...func(string) (string, error)) func(string) (string, error) {
	var fs []func(string) (string, error)
	for _, e := range edits {
		if e != nil {
			fs = append(fs, e)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return func(clc string) (string, error) {
		var err error
		for _, f := range fs {
			if clc, err = f(clc); err != nil {
				return "", err
			}
		}
		return clc, nil
	}
}
