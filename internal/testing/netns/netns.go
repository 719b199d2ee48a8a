// Package netns runs a piece of a test's Go code inside a network namespace made by `ip netns add`
// (an OpenStack cloud's, internal/testing/novatest), for the proofs that talk to services there.
package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs f on a thread that entered ns; the sockets f makes keep the namespace wherever they are
// used afterwards. The thread stays locked and the runtime ends it with the goroutine, so no other
// goroutine ever runs in the namespace.
func Do(ns string, f func() error) error {
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

// Dial opens a connection from inside ns (from this process's namespace when ns is empty).
func Dial(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if ns == "" {
		return d.DialContext(ctx, network, addr)
	}
	var c net.Conn
	err := Do(ns, func() (err error) {
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
