package capitest

import (
	"context"
	"fmt"
	"net"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/netns"
)

// Options.Netns runs the management side inside a network namespace (an OpenStack cloud's,
// internal/testing/novatest): the managers then reach the cloud's APIs on that namespace's
// loopback, where its Keystone catalog points, and its external network, where the floating IPs
// of the workload clusters' API servers are, as a management cluster outside the cloud does.

// dialer dials in ns, or in this process's namespace when ns is empty.
func dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(ctx, ns, network, addr)
	}
}

// freeIn reports whether port is free on 127.0.0.1 in ns as well (the cloud's services took
// ports there that the host's free-port check cannot see).
func freeIn(ns string, port int) bool {
	return netns.Do(ns, func() error {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
		}
		return err
	}) == nil
}
