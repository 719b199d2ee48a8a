package capo

import (
	"bytes"
	"fmt"
)

// The API server's load balancer (Octavia), on by default. Off gives what CAPO's
// cluster-template-without-lb.yaml gives: no apiServerLoadBalancer in the OpenStackCluster (CAPO
// then attaches the API server's floating IP to the control plane machine itself, which is
// CAPO's default for the floating IP) and one control plane machine, since without a load
// balancer the floating IP is the one address of the API server. CAPO documents that a cluster
// with neither a load balancer nor a floating IP needs configuration beyond a template.

const (
	varControlPlaneCount = "CONTROL_PLANE_MACHINE_COUNT"
	withoutLBHeader      = "# Without an API server load balancer (CAPO's without-lb): the API server's floating IP is on the one control plane machine.\n"
)

// withoutAPILoadBalancer edits a template as CAPO's without-lb kustomization does: the
// OpenStackCluster's (or a ClusterClass's OpenStackClusterTemplate's) apiServerLoadBalancer goes,
// and the control plane's replicas become 1.
func withoutAPILoadBalancer(tmpl []byte) ([]byte, error) {
	out := tmpl
	for _, indent := range []string{"  ", "      "} { // a cluster's spec, a template's spec.template.spec
		lb := indent + "apiServerLoadBalancer:\n" + indent + "  enabled: true\n"
		out = bytes.Replace(out, []byte(lb), nil, 1)
		replicas := indent + "replicas: ${" + varControlPlaneCount + "}\n"
		out = bytes.Replace(out, []byte(replicas), []byte(indent+"replicas: 1\n"), 1)
	}
	if bytes.Contains(out, []byte("apiServerLoadBalancer:")) || bytes.Contains(out, []byte("${"+varControlPlaneCount+"}")) || bytes.Equal(out, tmpl) {
		return nil, fmt.Errorf("embedded template: cannot remove its API server load balancer")
	}
	return append([]byte(withoutLBHeader), out...), nil
}
