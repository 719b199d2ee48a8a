package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// DefaultCacheDir is $XDG_CACHE_HOME/flatcar-capo (or ~/.cache/flatcar-capo).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory (%v); pass --cache-dir", err)
	}
	return filepath.Join(d, "flatcar-capo"), nil
}

// cacheEntry is one artifact in the cache: <root>/<arch>-usr/<version>/<file>.
//
// Layout and trust rules:
//   - <file> is a download whose SHA512 matched the signed DIGESTS when it was stored;
//   - <file>.DIGESTS.asc is that signed DIGESTS; on every use it is verified again with the
//     keyring in force and the cached file is re-hashed while it is read, so the cache is never
//     trusted on its own (a swapped keyring or a damaged file means a new download);
//   - <file>.partial holds the bytes of an interrupted download, never trusted: the next fetch
//     re-hashes them as the prefix of the stream and asks the server only for the rest;
//   - <file>.lock is held shared while a verified file is read and exclusive while it is
//     downloaded, replaced or removed: readers run side by side, a second run waits (bounded)
//     for a download instead of failing.
//
// Versions are unique across channels, so the channel is not part of the key.
type cacheEntry struct {
	File, Partial, Digests string
	lockFile               *os.File
	dir, file              string
}

// newCacheEntry names the entry's files without touching them.
func newCacheEntry(root string, r release.Release, file string) *cacheEntry {
	dir := filepath.Join(root, release.Board(r.Arch), r.Version)
	base := filepath.Join(dir, file)
	return &cacheEntry{File: base, Partial: base + ".partial", Digests: base + release.SignedDigestsSuffix, dir: dir, file: file}
}

// openCache opens the entry's lock file; lock takes the lock.
func openCache(root string, r release.Release, file string) (*cacheEntry, error) {
	e := newCacheEntry(root, r, file)
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the cache directory (choose another with --cache-dir): %w", err)
	}
	var err error
	if e.lockFile, err = os.OpenFile(e.File+".lock", os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("cannot use the cache (choose another with --cache-dir): %w", err)
	}
	return e, nil
}

// lockPoll is how often a waiting run tries the lock again.
const lockPoll = 200 * time.Millisecond

// lock takes the entry's lock, shared or exclusive. When another run holds it in the way, it
// says so on log once and waits, at most wait (a download's deadline: longer means the other
// run is stuck) or until ctx ends.
func (e *cacheEntry) lock(ctx context.Context, how filelock.Mode, wait time.Duration, log io.Writer) error {
	busy := func() {
		fmt.Fprintf(log, "another flatcar-capo is downloading or reading %s in %s; waiting for it (at most %s)\n", e.file, e.dir, wait)
	}
	err := filelock.Wait(ctx, e.lockFile, how, filelock.Options{Poll: lockPoll, Until: time.Now().Add(wait), Busy: busy})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, filelock.ErrTimeout):
		return fmt.Errorf("another flatcar-capo has held %s.lock for %s (the --download-timeout) and is still downloading or reading it: "+
			"it may be stuck; stop it, or use another --cache-dir", e.File, wait.Round(time.Second))
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return fmt.Errorf("cannot lock %s.lock: %w", e.File, err)
	}
}

// unlock lets go of the entry's lock (Close does too).
func (e *cacheEntry) unlock() { filelock.Unlock(e.lockFile) }

func (e *cacheEntry) Close() { e.lockFile.Close() }

// hit reports whether a verified download and its signed DIGESTS are stored.
func (e *cacheEntry) hit() bool {
	return regular(e.File) && regular(e.Digests)
}

func regular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// partialSize is the number of bytes an interrupted download left, 0 when none.
func (e *cacheEntry) partialSize() int64 {
	fi, err := os.Stat(e.Partial)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// store turns the verified .partial into the cached file, next to the DIGESTS that verified it.
func (e *cacheEntry) store(signedDigests []byte) error {
	tmp := e.Digests + ".tmp"
	if err := os.WriteFile(tmp, signedDigests, 0o600); err != nil {
		return fmt.Errorf("caching %s: %w", e.Digests, err)
	}
	if err := os.Rename(tmp, e.Digests); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("caching %s: %w", e.Digests, err)
	}
	if err := os.Rename(e.Partial, e.File); err != nil {
		return fmt.Errorf("caching %s: %w", e.File, err)
	}
	return nil
}

// discard forgets everything stored for the artifact.
func (e *cacheEntry) discard() {
	os.Remove(e.File)
	os.Remove(e.Digests)
	os.Remove(e.Partial)
}
