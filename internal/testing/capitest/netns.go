package capitest

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Options.Netns runs the management side inside a network namespace (an OpenStack cloud's,
// internal/testing/novatest): the managers then reach the cloud's APIs on that namespace's
// loopback, where its Keystone catalog points, and its external network, where the floating IPs
// of the workload clusters' API servers are, as a management cluster outside the cloud does.

// inNetns runs f on a thread that entered ns; the sockets f makes keep the namespace wherever
// they are used afterwards. The thread stays locked and the runtime ends it with the goroutine,
// so no other goroutine ever runs in the namespace.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread's namespace is not the process's
		h, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := unix.Setns(int(h.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// dialer dials in ns, or in this process's namespace when ns is empty.
func dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if ns == "" {
			return d.DialContext(ctx, network, addr)
		}
		var c net.Conn
		err := inNetns(ns, func() (err error) {
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// freeIn reports whether port is free on 127.0.0.1 in ns as well (the cloud's services took
// ports there that the host's free-port check cannot see).
func freeIn(ns string, port int) bool {
	return inNetns(ns, func() error {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			l.Close()
		}
		return err
	}) == nil
}
