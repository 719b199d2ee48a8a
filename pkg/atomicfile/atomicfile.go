// Package atomicfile writes an output next to its final path and renames it into place only when
// the whole content is there, so an interrupted or failed run never leaves a half-written file.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// Create opens a temporary file in the directory of path. The caller must call Commit or Abort
// (Abort after Commit is a no-op, so `defer f.Abort()` is the usual pattern).
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("cannot create a temporary file for %s: %w", path, err)
	}
	af := &File{File: f, Path: path}
	live.Lock()
	live.m[af] = struct{}{}
	live.Unlock()
	return af, nil
}

// Commit syncs (unless NoSync), closes and renames the temporary file to Path, with mode perm.
func (f *File) Commit(perm os.FileMode) error {
	if f.done {
		return errors.New("atomicfile: already committed or aborted")
	}
	defer forget(f)
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
		f.done = true
		return fmt.Errorf("cannot write %s: %w", f.Path, err)
	}
	f.done = true
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
