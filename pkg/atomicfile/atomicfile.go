// Package atomicfile writes an output next to its final path and renames it into place only when
// the whole content is there, so an interrupted or failed run never leaves a half-written file.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// live holds the temporary files not yet committed or aborted, for RemoveLive.
var live = struct {
	sync.Mutex
	m map[*File]struct{}
}{m: map[*File]struct{}{}}

// RemoveLive removes every temporary file still open: the process calls it before it exits
// without waiting for the commands to clean up (a second Ctrl-C, the grace period over), so a
// copy that filled the disk does not leave its temp file behind.
func RemoveLive() {
	live.Lock()
	defer live.Unlock()
	for f := range live.m {
		os.Remove(f.File.Name())
	}
}

func forget(f *File) {
	live.Lock()
	delete(live.m, f)
	live.Unlock()
}

// File is a temporary file (mode 0600) that becomes Path on Commit.
type File struct {
	*os.File
	Path string
	// NoSync makes Commit skip the fsync, as qemu-img convert and cp do: the rename still shows
	// the output complete or not at all (interruption, errors); only a power loss before the
	// kernel writes the pages back could leave it short. Waiting for 1 GiB to reach the disk
	// costs seconds a pipeline that reads the file next does not need.
	NoSync bool
	done   bool
}

// CheckPath tells, before any work, whether a file can be created at path: not when path is an
// existing directory, or its directory is missing, not a directory or not writable. The error
// names path as the user gave it (never the temporary file) and, but for a permission problem,
// wraps errs.ErrInvalid.
func CheckPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errs.Invalidf("%s is an existing directory; give the path of a file (e.g. %s)", path, filepath.Join(path, "NAME"))
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errs.Invalidf("cannot write %s: its directory %s does not exist; create it first", path, dir)
	case err != nil:
		return errs.Invalidf("cannot write %s: %v", path, err)
	case !st.IsDir():
		return errs.Invalidf("cannot write %s: %s is not a directory", path, dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		// The environment, not the value: exit 1 like any failure to write.
		return fmt.Errorf("cannot write %s: no write permission in %s (%v)", path, dir, err)
	}
	return nil
}

// Create opens a temporary file in the directory of path. The caller must call Commit or Abort
// (Abort after Commit is a no-op, so `defer f.Abort()` is the usual pattern).
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		if cerr := CheckPath(path); cerr != nil {
			return nil, cerr // the cause, in the user's terms
		}
		return nil, fmt.Errorf("cannot create a temporary file for %s: %w", path, err)
	}
	af := &File{File: f, Path: path}
	live.Lock()
	live.m[af] = struct{}{}
	live.Unlock()
	return af, nil
}

// WriteFile writes data to path atomically, as mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Commit(perm)
}

// Commit syncs (unless NoSync), closes and renames the temporary file to Path, with mode perm.
func (f *File) Commit(perm os.FileMode) error {
	if f.done {
		return errors.New("atomicfile: already committed or aborted")
	}
	defer forget(f)
	f.done = true
	var err error
	if !f.NoSync {
		err = f.File.Sync()
	}
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.File.Name(), perm)
	}
	if err == nil {
		err = os.Rename(f.File.Name(), f.Path)
	}
	if err != nil {
		os.Remove(f.File.Name())
		return fmt.Errorf("cannot write %s: %w", f.Path, err)
	}
	return nil
}

// Abort closes and removes the temporary file; safe to call more than once and after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.File.Name())
	forget(f)
}
