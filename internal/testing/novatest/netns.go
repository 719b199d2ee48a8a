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
// Neutron) at externalGW, the namespace's address on the external network, as a real cloud's
// guests reach its API addresses through their router: a DNAT per API port (exposeToGuests)
// turns externalGW:PORT into the loopback's 127.0.0.1:PORT, so the services keep listening on
// the loopback only. Keystone's catalog names these as the internal endpoints.
const (
	tunnelIP     = "10.255.0.1" // nova's my_ip and the VXLAN local_ip
	tunnelDev    = "fc-tun"
	externalDev  = "fc-ext"  // Neutron's physnet "extnet"
	externalPeer = "fc-extp" // the "outside" of the external network: reaches floating IPs
	externalCIDR = "172.24.4.0/24"
	externalGW   = "172.24.4.1"
)

// nsRun runs `ip -n NS ARGS...`, or `ip netns exec NS CMD...` when args start with "netns".
func nsRun(ctx context.Context, ns string, args ...string) error {
	full := append([]string{"-n", ns}, args...)
	if args[0] == "netns" {
		full = args
	}
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
	// DNAT to the loopback from outside needs route_localnet (see exposeToGuests).
	return nsRun(ctx, ns, "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
}

// exposeToGuests makes externalGW:port reach 127.0.0.1:port for each port: from the guests
// (PREROUTING, arriving from their routers on the external network) and from the namespace's
// own processes (OUTPUT: the services use the internal endpoints too, e.g. Nova's Neutron
// client prefers "internal").
func exposeToGuests(ctx context.Context, ns string, ports ...string) error {
	for _, p := range ports {
		for _, chain := range [][]string{{"PREROUTING", "-i", externalPeer}, {"OUTPUT"}} {
			args := append([]string{"netns", "exec", ns, "iptables", "-w", "-t", "nat", "-A"}, chain...)
			args = append(args, "-d", externalGW, "-p", "tcp", "--dport", p, "-j", "DNAT", "--to-destination", "127.0.0.1")
			if err := nsRun(ctx, ns, args...); err != nil {
				return err
			}
		}
	}
	return nil
}
