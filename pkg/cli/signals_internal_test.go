package cli

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The first SIGTERM cancels; the ones that follow (GNU timeout's second, a supervisor's repeat)
// are reported and the process lives on to finish its cleanup. Not from a terminal, even a
// SIGINT long after the first signal does not force the exit. The signals go to this test
// process itself: were one obeyed, the test binary would die.
func TestSecondSignalIsReported(t *testing.T) {
	var out lockedBuffer
	ctx, stop := watchSignals(&out, false, 0, time.Minute)
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first SIGTERM did not cancel")
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitFor(t, &out, "received SIGTERM again")
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	waitFor(t, &out, "received SIGINT (Ctrl-C) again")
	if !strings.Contains(out.String(), "it stops by itself when the cleanup is done") {
		t.Errorf("no hint in %q", out.String())
	}
}

func waitFor(t *testing.T, out *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("not reported: %q; got %q", want, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
