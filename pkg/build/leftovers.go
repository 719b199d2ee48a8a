package build

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile, inside a build directory, is flock'ed by the run that made it for as long as the
// run lives: the kernel drops the lock when the process dies, even by kill -9, so a later run
// tells a dead run's directory (work copy, SSH key) from a live one's without trusting pids.
const ownerFile = "owner.lock"

// lockBuildDir takes the owner lock of a fresh build directory and writes our pid into it.
func lockBuildDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the build directory %s: %w", dir, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// removeDeadLeftovers deletes what killed runs left in outDir: build directories whose owner
// lock nobody holds, and, when no live run is building there, the hidden temporary files of
// atomic writes (.NAME.tmp-*). It returns one line per removal for the progress output.
func removeDeadLeftovers(outDir string) []string {
	dirs, _ := filepath.Glob(filepath.Join(outDir, ".build-*"))
	var said []string
	live := 0
	for _, d := range dirs {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue
		}
		dead, pid := deadBuildDir(d)
		if !dead {
			live++
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			said = append(said, fmt.Sprintf("could not remove %s, left by a run that is gone: %v", d, err))
			continue
		}
		said = append(said, fmt.Sprintf("removed %s, left by a run that was killed%s", d, pid))
	}
	if live > 0 {
		return said // its temporary files may be in the making
	}
	tmps, _ := filepath.Glob(filepath.Join(outDir, ".*.tmp-*"))
	for _, t := range tmps {
		if st, err := os.Lstat(t); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if os.Remove(t) == nil {
			said = append(said, fmt.Sprintf("removed %s, a partial output of a run that was killed", t))
		}
	}
	return said
}

// deadBuildDir tells whether no live process holds d's owner lock; pid says whose it was. A
// directory without the lock file (made by a version without it, or the run died between
// mkdir and lock) counts as dead once it is a minute old.
func deadBuildDir(d string) (dead bool, pid string) {
	f, err := os.OpenFile(filepath.Join(d, ownerFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		st, serr := os.Stat(d)
		return serr == nil && time.Since(st.ModTime()) > time.Minute, ""
	}
	if err != nil {
		return false, ""
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false, ""
	}
	b := make([]byte, 32)
	n, _ := f.Read(b)
	if p, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil {
		pid = fmt.Sprintf(" (pid %d)", p)
	}
	return true, pid
}
