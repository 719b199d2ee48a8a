// Package filelock is the one flock(2) wait loop: the build's artifact and build-directory
// locks, the release cache's entry locks and the stand-in guest cache's lock all take theirs
// here. flock is advisory, per open file, and dropped by the kernel when its holder dies
// (kill -9 included), which is why the build and the caches use it rather than pid files.
package filelock

import (
	"cmp"
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// Mode is how the lock is held.
type Mode int

const (
	Exclusive Mode = syscall.LOCK_EX
	Shared    Mode = syscall.LOCK_SH
)

// ErrTimeout is Wait's error when the lock is still held at Options.Until.
var ErrTimeout = errors.New("the lock is still held by another process")

// TryLock takes the lock on f without waiting: false (and no error) when another process
// holds it in the way.
func TryLock(f *os.File, m Mode) (bool, error) {
	err := syscall.Flock(int(f.Fd()), int(m)|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	default:
		return false, os.NewSyscallError("flock", err)
	}
}

// Unlock lets go of f's lock (closing f does too).
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// Options say how Wait waits.
type Options struct {
	Poll  time.Duration // how often to try again; 250 ms when 0
	Until time.Time     // give up then with ErrTimeout; the zero time waits for ever
	Busy  func()        // called once, when the lock is first found held (to say who waits for what)
	// Enough, when set, is asked each time the lock is found held: true ends the wait with
	// ErrEnough, the lock not taken (what the holder makes is already there).
	Enough func() bool
}

// ErrEnough is Wait's error when Options.Enough ended the wait.
var ErrEnough = errors.New("what the lock's holder makes is already there")

// Wait takes the lock on f, trying again every Poll while another process holds it, until
// Options.Until or until ctx ends (its error is returned).
func Wait(ctx context.Context, f *os.File, m Mode, o Options) error {
	poll := cmp.Or(o.Poll, 250*time.Millisecond)
	for said := false; ; said = true {
		ok, err := TryLock(f, m)
		if ok || err != nil {
			return err
		}
		if o.Enough != nil && o.Enough() {
			return ErrEnough
		}
		if !said && o.Busy != nil {
			o.Busy()
		}
		d := poll
		if !o.Until.IsZero() {
			left := time.Until(o.Until)
			if left <= 0 {
				return ErrTimeout
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
