package novatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// proc is one daemon of the cloud, run in the namespace (`ip netns exec` execs it, so the PID is
// the daemon's) in a process group of its own, its output in LogDir/NAME.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs argv in the namespace with env added. Pdeathsig kills the daemon with the test
// process; it follows the thread that started it, so that goroutine keeps its thread until the
// daemon exits. Helpers a daemon forks (uwsgi workers, privsep, dnsmasq, QEMU) are found by
// the teardown (down.sh), which also runs when this process dies without stopping the cloud.
func (c *Cloud) start(name string, env []string, argv ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(c.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", c.Netns}, argv...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer logf.Close()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	c.record("pgid", fmt.Sprint(p.cmd.Process.Pid))
	return p, nil
}

// exited reports an error when the daemon is gone, naming its log.
func (c *Cloud) exited(p *proc) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log: %s\n%s", p.name, p.err, c.logPath(p.name), tail(c.logPath(p.name), 15))
	default:
		return nil
	}
}

func (c *Cloud) logPath(name string) string { return filepath.Join(c.LogDir, name+".log") }

// run runs a one-shot command (a database sync) in the namespace, its output in LogDir/NAME.log.
func (c *Cloud) run(ctx context.Context, name string, env []string, argv ...string) error {
	logf, err := os.OpenFile(c.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.Netns}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	// Pdeathsig follows the thread that forks: keep it ours until the command exits. Unlocked,
	// the thread could next serve a netns dial (netns.Dial), and one that cannot leave the
	// namespace again is ended with its goroutine: the kernel would kill this command then
	// (placement-db-sync was, once the catalog's registration dialled beside it).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v; its log: %s\n%s", name, err, c.logPath(name), tail(c.logPath(name), 15))
	}
	c.logf("%s: %.1f s", name, time.Since(start).Seconds())
	return nil
}

// stop ends every daemon's process group: SIGTERM, then SIGKILL after grace.
func (c *Cloud) stopProcs(grace time.Duration) {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		_ = syscall.Kill(-procs[i].cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errStopped = errors.New("novatest: the cloud is stopped")
