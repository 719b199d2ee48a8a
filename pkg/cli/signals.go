package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
)

// cleanupLimit is how long a cancelled command may take to clean up (remove temp files, delete
// a half-made Glance image, stop VMs) before the process exits anyway.
const cleanupLimit = 60 * time.Second

// forceAfter is how long after the first signal a second Ctrl-C from a terminal forces the
// exit: a user pressing it twice in a row meant once.
const forceAfter = 2 * time.Second

// interruptContext is cancelled by the first SIGINT, SIGTERM or SIGHUP (a closed terminal or
// SSH session, which would otherwise kill the process and leave a build's .build-* and lock),
// which starts the command's own cleanup and its report. Signals that follow are reported, not obeyed: GNU timeout sends
// SIGTERM to the child and again to its process group, and a supervisor may repeat itself; an
// exit then used to skip the cleanup and leave a build's directory and lock. Only a second
// Ctrl-C from a terminal, forceAfter after the first, or a cleanup that outlasts cleanupLimit
// forces the exit (130), and even that first removes what interrupt.OnForcedExit registered
// (the build directory, the artifact lock) and every atomic write's temporary file.
func interruptContext(stderr io.Writer) (context.Context, func()) {
	return watchSignals(stderr, term.IsTerminal(int(os.Stdin.Fd())), forceAfter, cleanupLimit)
}

func watchSignals(stderr io.Writer, fromTerminal bool, forceAfter, limit time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		var first time.Time
		var watchdog <-chan time.Time
		for {
			select {
			case <-done:
				return
			case <-watchdog:
				forceExit(stderr, fmt.Sprintf("the cleanup did not finish within %s", limit))
			case s := <-sigs:
				if first.IsZero() {
					first = time.Now()
					watchdog = time.After(limit)
					cancel()
					continue
				}
				waited := time.Since(first)
				if s == os.Interrupt && fromTerminal && waited >= forceAfter {
					forceExit(stderr, "a second Ctrl-C")
				}
				name, hint := "SIGTERM", "it stops by itself when the cleanup is done"
				switch s {
				case os.Interrupt:
					name = "SIGINT (Ctrl-C)"
				case syscall.SIGHUP:
					name = "SIGHUP"
				}
				if fromTerminal {
					hint = fmt.Sprintf("Ctrl-C again (%s after the first) forces the exit", forceAfter)
				}
				fmt.Fprintf(stderr, "received %s again after %s; still cleaning up (%s)\n",
					name, waited.Round(time.Millisecond), hint)
			}
		}
	}()
	return ctx, func() { signal.Stop(sigs); close(done); cancel() }
}

// forceExit removes what must not outlive the process and exits 130.
func forceExit(stderr io.Writer, why string) {
	interrupt.RunForced()
	atomicfile.RemoveLive()
	fmt.Fprintf(stderr, "Interrupted: exiting before the cleanup finished (%s); temporary files and any build directory and artifact lock were removed, but what else it was doing (a half-made Glance image, a download's partial file) may be left\n", why)
	os.Exit(exitInterrupted)
}

// readStdin reads r to its end (at most k.Max bytes), or returns when ctx is cancelled: a read blocked on a pipe or
// a terminal ignores cancellation, and Ctrl-C must still end the command (the read is left to
// the exiting process).
func readStdin(ctx context.Context, r io.Reader, k infile.Kind) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := infile.Read("standard input", r, k)
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
