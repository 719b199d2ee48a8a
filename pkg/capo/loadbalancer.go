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
	loadBalancerBlock    = "  apiServerLoadBalancer:\n    enabled: true\n"
	controlPlaneReplicas = "  replicas: ${CONTROL_PLANE_MACHINE_COUNT}\n"
	oneControlPlane      = "  replicas: 1\n"
	withoutLBHeader      = "# Without an API server load balancer (CAPO's without-lb): the API server's floating IP is on the one control plane machine.\n"
	varControlPlaneCount = "CONTROL_PLANE_MACHINE_COUNT"
)

// withoutAPILoadBalancer edits a base template as CAPO's without-lb kustomization does.
func withoutAPILoadBalancer(tmpl []byte) ([]byte, error) {
	for _, s := range []string{loadBalancerBlock, controlPlaneReplicas} {
		if n := bytes.Count(tmpl, []byte(s)); n != 1 {
			return nil, fmt.Errorf("embedded template has %d %q, want 1", n, s)
		}
	}
	out := bytes.Replace(tmpl, []byte(loadBalancerBlock), nil, 1)
	out = bytes.Replace(out, []byte(controlPlaneReplicas), []byte(oneControlPlane), 1)
	return append([]byte(withoutLBHeader), out...), nil
}
