package packer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// packer runs in a process group of its own (a Ctrl-C at the terminal must reach flatcar-capo
// only), so nothing stopped it, its plugin and QEMU when flatcar-capo was killed with SIGKILL.
// Now flatcar-capo starts packer through a watchdog: its own binary again, in that group, which
// runs packer and notices flatcar-capo's death by the end of a pipe (stdin) that only
// flatcar-capo holds open. It then stops packer as Ctrl-C would (SIGTERM), and after a grace
// period kills everything that descends from it (it is a child subreaper, so QEMU, orphaned by
// a dying plugin, stays its descendant) and the group. packer gets Pdeathsig too, should the
// watchdog itself die. Any binary that links this package can be the watchdog (see init).

// watchdogEnv marks a process started as the watchdog; the value is packer's path.
const watchdogEnv = "_FLATCAR_CAPO_PACKER_WATCHDOG"

// watchdogGrace is how long packer may clean up after flatcar-capo died.
var watchdogGrace = 20 * time.Second

func init() {
	if p := os.Getenv(watchdogEnv); p != "" {
		os.Exit(runWatchdog(p, os.Args[1:]))
	}
}

// watchdogCommand is the command that runs packer with args under the watchdog, or packer alone
// (with Pdeathsig) when our own executable cannot be found.
func watchdogCommand(packer string, args []string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		cmd := exec.Command(packer, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		return cmd
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), watchdogEnv+"="+packer)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func runWatchdog(packer string, args []string) int {
	const prSetChildSubreaper = 36
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	cmd := exec.Command(packer, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, watchdogEnv+"=") }) // packer is no watchdog
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	signal.Ignore(syscall.SIGPIPE) // our reader may be dead: that must not end the watchdog
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting packer: %v\n", err)
		return 127
	}
	go func() {
		for s := range sigs { // flatcar-capo's own SIGTERM (Ctrl-C): pass it on
			cmd.Process.Signal(s)
		}
	}()
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin) // returns when flatcar-capo is gone
		close(gone)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-gone:
		// Nobody reads packer's output any more; it may die of that, or clean up on SIGTERM.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(watchdogGrace):
		}
		killDescendants(os.Getpid())
		syscall.Kill(-os.Getpid(), syscall.SIGKILL) // the group, this process last
		return 1
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// killDescendants SIGKILLs every process below pid (from /proc's parent links).
func killDescendants(pid int) {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		line := string(b)
		// pid (comm) state ppid ...: comm may hold spaces and parentheses; cut at the last ')'.
		i := strings.LastIndexByte(line, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(line[i+1:])
		if len(fields) < 2 {
			continue
		}
		p, _ := strconv.Atoi(strings.Fields(line)[0])
		pp, _ := strconv.Atoi(fields[1])
		children[pp] = append(children[pp], p)
	}
	queue := append([]int{}, children[pid]...)
	for i := 0; i < len(queue); i++ { // breadth first: the queue grows by each one's children
		syscall.Kill(queue[i], syscall.SIGKILL)
		queue = append(queue, children[queue[i]]...)
	}
}
