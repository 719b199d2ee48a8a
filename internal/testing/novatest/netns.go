package novatest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// The cloud's network namespace: its own loopback (every API, RabbitMQ and libvirt listen on its
// 127.0.0.1, on their usual ports), the bridges, taps and iptables rules of Neutron's Linux bridge
// agent, and two veth pairs that stand in for a host's NICs (no dummy or VLAN module here):
// tunnel (the VXLAN endpoint of tenant networks) and external (the flat provider network that
// routers and floating IPs sit on). Deleting it, once its processes are gone, removes them all.
//
// Guests reach the APIs a workload cluster calls (the cloud controller manager: Keystone, Nova,
// Neutron) at externalGW, the namespace's address on the external network, through their router,
// as a real cloud's guests reach its API addresses: those three listen on every address of the
// namespace (the others on its loopback), and Keystone's catalog names externalGW as Nova's and
// Neutron's internal endpoints. (A DNAT to the loopback does not do: the guests' packets cross the
// external bridge first, where br_netfilter's conntrack settles their NAT before they reach
// externalGW.)
const (
	tunnelIP     = "10.255.0.1" // nova's my_ip and the VXLAN local_ip
	tunnelDev    = "fc-tun"
	externalDev  = "fc-ext"  // Neutron's physnet "extnet"
	externalPeer = "fc-extp" // the "outside" of the external network: reaches floating IPs
	externalCIDR = "172.24.4.0/24"
	externalGW   = "172.24.4.1"
)

func nsRun(ctx context.Context, ns string, args ...string) error {
	full := append([]string{"-n", ns}, args...)
	if out, err := exec.CommandContext(ctx, "ip", full...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createNetns makes the namespace and its links.
func createNetns(ctx context.Context, ns string) error {
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", tunnelDev, "type", "veth", "peer", "name", tunnelDev + "p"},
		{"addr", "add", tunnelIP + "/24", "dev", tunnelDev},
		{"link", "set", tunnelDev, "up"},
		{"link", "set", tunnelDev + "p", "up"},
		{"link", "add", externalDev, "type", "veth", "peer", "name", externalPeer},
		{"addr", "add", externalGW + "/24", "dev", externalPeer},
		{"link", "set", externalDev, "up"},
		{"link", "set", externalPeer, "up"},
	}
	for _, s := range steps {
		if err := nsRun(ctx, ns, s...); err != nil {
			return err
		}
	}
	return nil
}
