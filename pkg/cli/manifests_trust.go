package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// nodeTrustFlags are manifests' --http-proxy, --https-proxy and --no-proxy; --ca-file is the
// network flag, so the CA that this host trusts for the marker files is the nodes' too.
type nodeTrustFlags struct {
	httpProxy, httpsProxy, noProxy string
}

func addNodeTrustFlags(f *pflag.FlagSet, n *nodeTrustFlags) {
	if ca := f.Lookup("ca-file"); ca != nil { // the network flag: here it is the nodes' CA too
		ca.Usage = "PEM CA(s) trusted here (the marker files) and by the nodes: Ignition's certificateAuthorities (its own downloads, e.g. the sysext) and /etc/ssl/certs"
	}
	f.StringVar(&n.httpProxy, "http-proxy", "", "HTTP_PROXY of the nodes' containerd, kubelet and systemd-sysupdate (Ignition 2.3 itself has no proxy)")
	f.StringVar(&n.httpsProxy, "https-proxy", "", "HTTPS_PROXY of the nodes' containerd, kubelet and systemd-sysupdate")
	f.StringVar(&n.noProxy, "no-proxy", "", "NO_PROXY additions (localhost,127.0.0.1,169.254.169.254 are always in it): the API server and its LB, node subnet, service and pod CIDRs, .svc,.cluster.local")
}

// trust reads --ca-file (into Ignition's certificateAuthorities and the nodes' trust store) and
// takes the proxies; capo.Render validates them.
func (n nodeTrustFlags) trust(net httpx.Options) (capo.NodeTrust, error) {
	t := capo.NodeTrust{HTTPProxy: n.httpProxy, HTTPSProxy: n.httpsProxy, NoProxy: n.noProxy}
	if net.CAFile == "" {
		return t, nil
	}
	if err := net.Validate(); err != nil { // the PEM check of --ca-file
		return t, err
	}
	pem, err := infile.ReadFile("--ca-file", net.CAFile, infile.CA)
	if err != nil {
		return t, errs.Invalid(err)
	}
	t.CAPEM = pem
	return t, nil
}

func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}
