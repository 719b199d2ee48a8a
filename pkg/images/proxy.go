package images

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// nodeNoProxy is what NO_PROXY always holds on the node: itself and the metadata service. The
// API server (and its load balancer), the service and pod CIDRs and the node subnet are the
// cluster's to add with --no-proxy.
var nodeNoProxy = []string{"localhost", "127.0.0.1", "169.254.169.254"}

// NoProxyList is NodeNoProxy plus extra (comma-separated), each entry once, in order.
func NoProxyList(extra string) string {
	out := slices.Clone(nodeNoProxy)
	for _, e := range strings.Split(extra, ",") {
		if e = strings.TrimSpace(e); e != "" && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return strings.Join(out, ",")
}

// ProxyHasPassword says whether a proxy URL carries credentials (the image then carries them).
func ProxyHasPassword(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil
}

// proxyFiles are the environment file (0600) and the drop-ins of containerd and kubelet that
// read it; nothing without a proxy.
func (n Node) proxyFiles() ([]File, error) {
	if n.HTTPProxy == "" && n.HTTPSProxy == "" {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString("# flatcar-capo: the proxy of containerd and kubelet (--http-proxy, --https-proxy, --no-proxy)\n")
	for _, kv := range []struct{ k, v string }{{"HTTP_PROXY", n.HTTPProxy}, {"HTTPS_PROXY", n.HTTPSProxy}, {"NO_PROXY", NoProxyList(n.NoProxy)}} {
		if kv.v == "" {
			continue
		}
		v, err := EnvFileValue(kv.v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %v", strings.ReplaceAll(strings.ToLower(kv.k), "_", "-"), err)
		}
		fmt.Fprintf(&b, "%s=%s\n%s=%s\n", kv.k, v, strings.ToLower(kv.k), v)
	}
	// node.ProxyEnvFile is root-only; the containerd and kubelet drop-ins read it with EnvironmentFile=.
	out := []File{{Path: node.InRoot(node.ProxyEnvFile), Mode: 0o600, Content: []byte(b.String())}}
	for _, u := range []string{node.Containerd, node.Kubelet} {
		out = append(out, File{Path: node.InRoot(node.ProxyDropIn(u)), Mode: 0o644,
			Content: []byte("# the proxy settings are in a root-only file: they may carry a password\n[Service]\nEnvironmentFile=" + node.ProxyEnvFile + "\n")})
	}
	return out, nil
}

// ValidateProxies checks --http-proxy and --https-proxy (http(s)://[user:password@]host:port)
// and --no-proxy (comma-separated hosts, .domains, IPs or CIDRs): what is written into the
// node's environment file and Ignition, so quotes, spaces and control characters are refused.
func ValidateProxies(httpProxy, httpsProxy, noProxy string) error {
	for _, p := range []struct{ flag, v string }{{"http-proxy", httpProxy}, {"https-proxy", httpsProxy}} {
		if p.v == "" {
			continue
		}
		redact.SecretsOfURL(p.v) // never in a log, the record or a report
		u, err := validateHTTPURL(p.v)
		if err == nil && strings.Trim(u.Path, "/") != "" {
			err = fmt.Errorf("a proxy URL has no path")
		}
		if err != nil {
			return fmt.Errorf("invalid --%s %s: %v; want http(s)://[USER:PASSWORD@]host:port, e.g. http://proxy.example:3128", p.flag, redact.URL(p.v), err)
		}
	}
	for _, e := range strings.Split(noProxy, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if hasControl(e) || strings.ContainsAny(e, "\"'\\ /=") && !isCIDR(e) {
			return fmt.Errorf("invalid --no-proxy entry %q: want comma-separated host names, .domains, IP addresses or CIDRs (e.g. 10.96.0.0/12,.cluster.local,api.example)", e)
		}
	}
	if noProxy != "" && httpProxy == "" && httpsProxy == "" {
		return fmt.Errorf("--no-proxy without --http-proxy or --https-proxy does nothing: give the proxy too, or leave --no-proxy out")
	}
	return nil
}

func isCIDR(s string) bool {
	_, _, err := net.ParseCIDR(s)
	return err == nil
}
