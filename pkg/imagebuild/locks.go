package imagebuild

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// artifactLockWait bounds how long a build waits for another build of the same artifact.
const artifactLockWait = 2 * time.Hour

// lockArtifact takes the lock next to artifact (.NAME.lock, flock'ed for the whole build), so
// two builds into one --output-dir and name never interleave their artifact and record: the
// second waits, says so once, and then usually reuses what the first made. The kernel drops the
// lock when a holder dies, kill -9 included (the next run then takes the file over). The holder
// removes the file before it lets go (unlockArtifact); a waiter that then gets the lock of the
// removed file sees that the path no longer names it and starts over, so no run ever holds a
// lock nobody else can see.
func lockArtifact(ctx context.Context, artifact string, log io.Writer) (*os.File, error) {
	path := artifactLockPath(artifact)
	deadline := time.Now().Add(artifactLockWait)
	said := false
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("locking %s against a concurrent build: %w", artifact, err)
		}
		busy := func() {
			if said {
				return
			}
			b := make([]byte, 16)
			n, _ := f.ReadAt(b, 0)
			fmt.Fprintf(log, "another flatcar-capo (pid %s) is building %s; waiting for it (at most %s)\n",
				strings.TrimSpace(string(b[:n])), artifact, artifactLockWait)
			said = true
		}
		err = filelock.Wait(ctx, f, filelock.Exclusive, filelock.Options{Until: deadline, Busy: busy})
		if err != nil {
			f.Close()
			if errors.Is(err, filelock.ErrTimeout) {
				return nil, fmt.Errorf("another flatcar-capo has been building %s for over %s (lock %s); stop it, or build into another --output-dir", artifact, artifactLockWait, path)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !sameFile(f, path) { // removed by the run that held it: take the new one
			f.Close()
			continue
		}
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		return f, nil
	}
}

func artifactLockPath(artifact string) string {
	return filepath.Join(filepath.Dir(artifact), "."+filepath.Base(artifact)+".lock")
}

// sameFile says whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// unlockArtifact removes the lock file, then lets go of the lock.
func unlockArtifact(f *os.File, artifact string) {
	if sameFile(f, artifactLockPath(artifact)) {
		os.Remove(artifactLockPath(artifact))
	}
	f.Close()
}

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
	if ok, err := filelock.TryLock(f, filelock.Exclusive); !ok {
		f.Close()
		return nil, fmt.Errorf("locking the build directory %s: %w", dir, cmp.Or(err, errors.New("another process holds it")))
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
	if ok, _ := filelock.TryLock(f, filelock.Exclusive); !ok {
		return false, ""
	}
	b := make([]byte, 32)
	n, _ := f.Read(b)
	if p, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil {
		pid = fmt.Sprintf(" (pid %d)", p)
	}
	return true, pid
}
