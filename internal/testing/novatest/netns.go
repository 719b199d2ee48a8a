package novatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// The cloud's network namespace: its own loopback (every API, RabbitMQ and libvirt listen on its
// 127.0.0.1, on their usual ports), the bridges, taps and iptables rules of Neutron's Linux bridge
// agent, and two veth pairs that stand in for a host's NICs (no dummy or VLAN module here):
// tunnel (the VXLAN endpoint of tenant networks) and external (the flat provider network that
// routers and floating IPs sit on). Deleting it, once its processes are gone, removes them all.
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

// dialIn opens a TCP connection from inside the namespace: the socket is made on a thread that
// entered it, and keeps the namespace wherever it is used afterwards. The thread stays locked and
// is discarded by the runtime when the goroutine ends, so no other goroutine runs in the namespace.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's namespace is not the process's
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("entering network namespace %s: %w", ns, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
