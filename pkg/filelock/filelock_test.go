package filelock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// flock locks belong to the open file, so two opens of one path in this process contend as two
// processes would.
func open2(t *testing.T) (a, b *os.File) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.lock")
	var err error
	if a, err = os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err = os.Open(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestTryLockModes(t *testing.T) {
	for _, c := range []struct {
		held, want filelock.Mode
		ok         bool
	}{
		{filelock.Exclusive, filelock.Exclusive, false},
		{filelock.Exclusive, filelock.Shared, false},
		{filelock.Shared, filelock.Exclusive, false},
		{filelock.Shared, filelock.Shared, true},
	} {
		a, b := open2(t)
		if ok, err := filelock.TryLock(a, c.held); !ok || err != nil {
			t.Fatalf("first lock: %v %v", ok, err)
		}
		ok, err := filelock.TryLock(b, c.want)
		if ok != c.ok || err != nil {
			t.Errorf("held %v, asked %v: got %v (%v), want %v", c.held, c.want, ok, err, c.ok)
		}
		if !c.ok {
			// Unlock, and closing, let the other one in.
			filelock.Unlock(a)
			if ok, _ := filelock.TryLock(b, c.want); !ok {
				t.Errorf("held %v, asked %v: still refused after Unlock", c.held, c.want)
			}
		}
	}
}

func TestWaitTakesTheLockWhenFreed(t *testing.T) {
	a, b := open2(t)
	filelock.TryLock(a, filelock.Exclusive)
	time.AfterFunc(300*time.Millisecond, func() { a.Close() })
	var busy atomic.Int32
	start := time.Now()
	err := filelock.Wait(context.Background(), b, filelock.Exclusive, filelock.Options{Poll: 20 * time.Millisecond, Busy: func() { busy.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("took the lock after %s, while the holder kept it 300 ms", d)
	}
	if busy.Load() != 1 {
		t.Errorf("Busy called %d times, want once", busy.Load())
	}
	if ok, _ := filelock.TryLock(a, filelock.Shared); ok {
		t.Error("the lock Wait took is not held")
	}
}

func TestWaitGivesUpAtUntil(t *testing.T) {
	a, b := open2(t)
	filelock.TryLock(a, filelock.Shared)
	var busy atomic.Int32
	start := time.Now()
	err := filelock.Wait(context.Background(), b, filelock.Exclusive, filelock.Options{Poll: time.Hour, Until: start.Add(200 * time.Millisecond), Busy: func() { busy.Add(1) }})
	if !errors.Is(err, filelock.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %s, want 200 ms (the poll must not overshoot Until)", d)
	}
	if busy.Load() != 1 {
		t.Errorf("Busy called %d times, want once", busy.Load())
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	a, b := open2(t)
	filelock.TryLock(a, filelock.Exclusive)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := filelock.Wait(ctx, b, filelock.Exclusive, filelock.Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

func TestTryLockOnAClosedFile(t *testing.T) {
	a, _ := open2(t)
	a.Close()
	if ok, err := filelock.TryLock(a, filelock.Exclusive); ok || err == nil {
		t.Fatalf("closed file: got %v %v, want an error", ok, err)
	}
}

// Enough ends a wait on a held lock, without the lock, once what its holder makes is there.
func TestWaitEndsWhenEnough(t *testing.T) {
	a, b := open2(t)
	filelock.TryLock(a, filelock.Exclusive)
	var asked atomic.Int32
	err := filelock.Wait(context.Background(), b, filelock.Shared, filelock.Options{Poll: 10 * time.Millisecond,
		Until: time.Now().Add(5 * time.Second), Enough: func() bool { return asked.Add(1) == 3 }})
	if !errors.Is(err, filelock.ErrEnough) || asked.Load() != 3 {
		t.Fatalf("got %v after %d asks, want ErrEnough after 3", err, asked.Load())
	}
	if ok, _ := filelock.TryLock(b, filelock.Shared); ok {
		t.Error("the lock was taken though its holder still has it")
	}
}
