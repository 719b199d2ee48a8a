package cli

import (
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
)

// addNodeTrustFlags are manifests' --http-proxy, --https-proxy and --no-proxy; --ca-file is the
// network flag, so the CA that this host trusts for the marker files is the nodes' too.
func addNodeTrustFlags(f *pflag.FlagSet, o *capo.ManifestsOptions) {
	if ca := f.Lookup("ca-file"); ca != nil { // the network flag: here it is the nodes' CA too
		ca.Usage = "PEM CA(s) trusted here (the marker files) and by the nodes: Ignition's certificateAuthorities (its own downloads, e.g. the sysext) and /etc/ssl/certs"
	}
	f.StringVar(&o.HTTPProxy, "http-proxy", "", "HTTP_PROXY of the nodes' containerd, kubelet and systemd-sysupdate (Ignition 2.3 itself has no proxy)")
	f.StringVar(&o.HTTPSProxy, "https-proxy", "", "HTTPS_PROXY of the nodes' containerd, kubelet and systemd-sysupdate")
	f.StringVar(&o.NoProxy, "no-proxy", "", "NO_PROXY additions (localhost,127.0.0.1,169.254.169.254 are always in it): the API server and its LB, node subnet, service and pod CIDRs, .svc,.cluster.local")
}
