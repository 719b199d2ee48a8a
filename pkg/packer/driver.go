package packer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Driver hides the packer process, so the steps around it are testable without one (the way
// packer-plugin-qemu hides qemu behind its Driver).
type Driver interface {
	// Path is the packer executable the driver runs.
	Path() string
	// Run runs packer with inv and returns when it has exited. Every stdout line goes to
	// inv.Stdout. A non-zero exit is an *ExitError; a cancelled ctx ends packer gracefully
	// (SIGTERM) and returns ctx's error.
	Run(ctx context.Context, inv Invocation) error
}

// Invocation is one packer command.
type Invocation struct {
	Args   []string
	Env    []string // added to the current environment
	Dir    string
	Stdout func(line string)
}

// ExitError is a packer run that exited non-zero.
type ExitError struct {
	Args   []string
	Code   int
	Stderr string // the last lines of its stderr
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("packer %s exited with code %d", strings.Join(e.Args, " "), e.Code)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

// ExecDriver runs a packer binary in a process group of its own, so that a Ctrl-C at the
// terminal reaches flatcar-capo only and packer is stopped the way it wants to be: SIGTERM, after
// which it shuts QEMU down and removes its output. Whatever is left in the group after packer
// exited (a QEMU that outlived it) is killed.
type ExecDriver struct {
	Packer string
	// Grace is how long packer gets after SIGTERM before its group is killed (default 60 s).
	Grace time.Duration
}

// Path implements Driver.
func (d *ExecDriver) Path() string { return d.Packer }

// Run implements Driver.
func (d *ExecDriver) Run(ctx context.Context, inv Invocation) error {
	cmd := watchdogCommand(d.Packer, inv.Args) // in its own group; dies with us (watchdog.go)
	cmd.Dir = inv.Dir
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, inv.Env...)
	// The watchdog's stdin: only we hold the other end, so it reads EOF when we die, kill -9
	// included.
	lifeline, lifelineW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer lifelineW.Close()
	cmd.Stdin = lifeline
	// os.Pipes rather than StdoutPipe or a Writer: a child that inherited packer's stdout or
	// stderr must not keep Wait from returning; the readers see EOF once the group is gone.
	stdout, wout, err := os.Pipe()
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderrR, werr, err := os.Pipe()
	if err != nil {
		wout.Close()
		return err
	}
	defer stderrR.Close()
	cmd.Stdout, cmd.Stderr = wout, werr
	err = cmd.Start()
	wout.Close()
	werr.Close()
	lifeline.Close()
	if err != nil {
		return fmt.Errorf("starting packer: %w", err)
	}
	pgid := cmd.Process.Pid

	stderr := &tailBuffer{max: 4096}
	var wg sync.WaitGroup
	wg.Go(func() { scanLines(stdout, inv.Stdout) })
	wg.Go(func() { io.Copy(stderr, stderrR) })

	exited := make(chan struct{})
	cancelled := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		close(cancelled)
		syscall.Kill(pgid, syscall.SIGTERM)
		grace := d.Grace
		if grace <= 0 {
			grace = 60 * time.Second
		}
		select {
		case <-exited:
		case <-time.After(grace):
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	// Stragglers in packer's group (QEMU, plugins) do not outlive it.
	syscall.Kill(-pgid, syscall.SIGKILL)
	wg.Wait()

	select {
	case <-cancelled:
		return ctx.Err()
	default:
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return &ExitError{Args: inv.Args, Code: ee.ExitCode(), Stderr: stderr.buf.String()}
	}
	return waitErr
}

func scanLines(r io.Reader, f func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if f != nil {
			f(sc.Text())
		}
	}
	io.Copy(io.Discard, r) // a line over the limit must not block packer
}

// tailBuffer keeps the last max bytes written to it. Its one writer is done (wg.Wait) before
// it is read.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}
