package netns

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// After many Do calls at once (some land on the main thread), every thread of this process is
// back in its own namespace, while each call ran inside ns: a thread left in ns made the whole
// process one of ns's for `ip netns pids`, and novatest's teardown killed the test.
func TestDoLeavesNoThreadInTheNamespace(t *testing.T) {
	testutil.RequireReal(t, "a network namespace of its own")
	testutil.RequireRoot(t, "ip netns add")
	testutil.RequireTools(t, "ip")
	ns := fmt.Sprintf("fcapo-netns-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	inNS, err := inode("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Do(ns, func() error {
				// Inside: this thread is in ns, and ns has only a loopback that is down.
				if id, err := inode("/proc/thread-self/ns/net"); err != nil || id != inNS {
					return fmt.Errorf("Do's thread is in namespace %d, want %s's %d (%v)", id, ns, inNS, err)
				}
				ifs, err := net.Interfaces()
				if err != nil || len(ifs) != 1 || ifs[0].Name != "lo" {
					return fmt.Errorf("interfaces in %s: %v %v", ns, ifs, err)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if id, err := inode(task); err == nil && id == inNS {
			t.Errorf("thread %s is still in %s after Do", filepath.Dir(filepath.Dir(task)), ns)
		}
	}
	// And the dialer: a connection from inside ns reaches ns's loopback, not the process's.
	if _, err := Dial(context.Background(), ns, "tcp", "127.0.0.1:1"); err == nil {
		t.Error("a dial in ns (loopback down) succeeded")
	}
}

func inode(path string) (uint64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Sys().(*syscall.Stat_t).Ino, nil
}
