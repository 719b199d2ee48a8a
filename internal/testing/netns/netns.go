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
// used afterwards. The thread stays locked while it is in ns, so no other goroutine runs there,
// and goes back to its own namespace before it is released: the goroutine may have run on the
// process's main thread, which the runtime never ends, and a main thread left in ns makes the
// whole process look like one of ns's (`ip netns pids`), which the cloud's teardown kills.
func Do(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := enter(ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		err = f()
		// Back home, or stay locked: the runtime then ends this thread with the goroutine.
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// enter moves the calling (locked) thread into ns and returns its own namespace, to go back to.
func enter(ns string) (*os.File, error) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	h, err := os.Open("/run/netns/" + ns)
	if err != nil {
		home.Close()
		return nil, err
	}
	defer h.Close()
	if err := unix.Setns(int(h.Fd()), unix.CLONE_NEWNET); err != nil {
		home.Close()
		return nil, fmt.Errorf("entering network namespace %s: %w", ns, err)
	}
	return home, nil
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
