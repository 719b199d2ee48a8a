package fetch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
//   - <file>.lock serialises fetches of the same artifact.
//
// Versions are unique across channels, so the channel is not part of the key.
type cacheEntry struct {
	File, Partial, Digests string
	lock                   *os.File
}

func openCache(root string, r release.Release, file string) (*cacheEntry, error) {
	dir := filepath.Join(root, release.Board(r.Arch), r.Version)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the cache directory (choose another with --cache-dir): %w", err)
	}
	base := filepath.Join(dir, file)
	lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot use the cache (choose another with --cache-dir): %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another flatcar-capo is downloading %s into %s; wait for it to finish", file, dir)
		}
		return nil, fmt.Errorf("cannot lock %s.lock: %w", base, err)
	}
	return &cacheEntry{File: base, Partial: base + ".partial", Digests: base + release.SignedDigestsSuffix, lock: lock}, nil
}

func (e *cacheEntry) Close() { e.lock.Close() }

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
