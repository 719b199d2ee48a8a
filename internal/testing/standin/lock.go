package standin

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// lock takes an exclusive flock on path, waiting (and honouring ctx) while another process
// holds it; the kernel releases it if the holder dies.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := filelock.Wait(ctx, f, filelock.Exclusive, filelock.Options{Poll: 500 * time.Millisecond}); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// prune removes the cached builds of other inputs (older revisions of the guest) that no
// process is building and that have not been touched for an hour: each is ~1.5 GB sparse.
func prune(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == keep || len(name) != len(keep) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		f, err := os.OpenFile(filepath.Join(root, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			continue
		}
		if ok, _ := filelock.TryLock(f, filelock.Exclusive); ok {
			os.RemoveAll(filepath.Join(root, name))
			os.Remove(f.Name())
		}
		f.Close()
	}
}
