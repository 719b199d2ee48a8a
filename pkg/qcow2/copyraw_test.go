package qcow2

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// CopyToRaw skips the truncate on an empty output (ext4 would flush it on close) but must still
// empty one that holds old data: otherwise stale bytes would show through the holes.
func TestCopyToRawEmptiesAnOldOutput(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	src := openRaw(t, raw)
	for _, old := range []int64{0, testDiskSize + 1<<20} {
		out := filepath.Join(dir, "out.raw")
		stale := make([]byte, old)
		for i := range stale {
			stale[i] = 0xa5
		}
		if err := os.WriteFile(out, stale, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(out, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := CopyToRaw(context.Background(), src, f, 2, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		sameFile(t, out, raw)
	}
}

// failingSource fails every read, but only once all readers are inside ReadAt: that is what a
// full disk does to the pool (every write fails at about the same time).
type failingSource struct {
	readers sync.WaitGroup
	size    int64
}

func (s *failingSource) ReadAt(p []byte, off int64) (int, error) {
	s.readers.Done()
	s.readers.Wait()
	return 0, errors.New("no space left on device")
}
func (s *failingSource) Size() int64                        { return s.size }
func (s *failingSource) WriteAt([]byte, int64) (int, error) { return 0, vdisk.ErrReadOnly }
func (s *failingSource) Extents(ctx context.Context, fn func(off, n int64) error) error {
	return fn(0, s.size)
}

// Every reader failing at once must end CopyToRaw with the error, whatever the worker count:
// the error channel once held workers+1 values while minReaders readers sent, so with fewer
// than 4 workers the copy hung forever on a full disk.
func TestCopyToRawAllReadersFailing(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		src := &failingSource{size: int64(max(workers, minReaders)) * chunkBytes * 4}
		src.readers.Add(max(workers, minReaders))
		f, err := os.Create(filepath.Join(t.TempDir(), "out.raw"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- CopyToRaw(context.Background(), src, f, workers, nil) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("workers=%d: error %v, want the readers' failure", workers, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("workers=%d: CopyToRaw hung after every reader failed", workers)
		}
		f.Close()
	}
}
