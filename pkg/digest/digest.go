// Package digest is the one file hash: the build record's sha256/sha512, the Kubernetes cache
// check, manifests' --sysext sha512 and the tests' hashes all read a file through File.
package digest

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
)

// file returns the hex digest of the file at path under h, and its length.
func file(path string, h hash.Hash) (sum string, n int64, err error) {
	sums, n, err := Files(path, h)
	if err != nil {
		return "", 0, err
	}
	return sums[0], n, nil
}

// Files reads the file at path once for every hash in hs and returns their hex digests in
// order, and its length (a published sysext carries both its sha256 and sha512). An error
// opening or reading it names the file.
func Files(path string, hs ...hash.Hash) (sums []string, n int64, err error) {
	return FilesContext(context.Background(), path, hs...)
}

// FilesContext is Files that stops when ctx is cancelled (Ctrl-C or SIGTERM while a large
// image is hashed), returning ctx's error.
func FilesContext(ctx context.Context, path string, hs ...hash.Hash) (sums []string, n int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return Reader(ctx, path, f, hs...)
}

// Reader is FilesContext on r, which what names in errors.
func Reader(ctx context.Context, what string, r io.Reader, hs ...hash.Hash) (sums []string, n int64, err error) {
	w := make([]io.Writer, len(hs))
	for i, h := range hs {
		w[i] = h
	}
	if n, err = io.Copy(io.MultiWriter(w...), ctxReader{ctx, r}); err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, fmt.Errorf("reading %s: %w", what, err) // a read error does not name the file
	}
	for _, h := range hs {
		sums = append(sums, hex.EncodeToString(h.Sum(nil)))
	}
	return sums, n, nil
}

// ctxReader ends a read loop once ctx is cancelled (each read is at most io.Copy's 32 KiB).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// SHA256 is File with sha256.
func SHA256(path string) (string, int64, error) { return file(path, sha256.New()) }

// SHA512 is File with sha512.
func SHA512(path string) (string, int64, error) { return file(path, sha512.New()) }
