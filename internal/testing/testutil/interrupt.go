package testutil

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Interrupt starts cmd, sends it SIGINT (Ctrl-C) once ready delivers or closes, and returns its
// stderr; the test fails unless the command then exits 130. what names the awaited point for
// the failure messages ("the first image bytes").
func Interrupt(t testing.TB, cmd *exec.Cmd, ready <-chan struct{}, what string) string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case <-ready:
		cmd.Process.Signal(os.Interrupt)
		err = <-exited
	case err = <-exited:
		t.Fatalf("waiting for %s: the command ended first (%v):\n%s", what, err, stderr.String())
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("waiting for %s: not within 3 minutes:\n%s", what, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; stderr:\n%s", err, stderr.String())
	}
	return stderr.String()
}
