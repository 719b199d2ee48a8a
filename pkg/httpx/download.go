package httpx

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
)

// Digest is what a download must hash to: Algo is "sha256" or "sha512"; an empty Hex accepts
// any content and reports its digest (a --sysext URL publishes none; its digest keys the build).
type Digest struct {
	Algo, Hex string
}

// DigestError is a download whose digest differs from the expected one; nothing was kept.
type DigestError struct {
	URL       string
	Algo      string
	Want, Got string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s mismatch for %s: expected %s, got %s", e.Algo, e.URL, e.Want, e.Got)
}

// Downloaded is a verified download.
type Downloaded struct {
	Path   string
	Digest string // hex, of Algo
	Bytes  int64
}

// Download fetches url into path: through a temporary file next to it, hashed while it
// streams, renamed into place (with mode) only when the digest matches. On any failure nothing
// is left at path or beside it. Retries, resume, the stall timeout and the deadline are the
// client's.
func (c *Client) Download(ctx context.Context, url, path string, want Digest, mode os.FileMode) (*Downloaded, error) {
	var h hash.Hash
	switch want.Algo {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return nil, fmt.Errorf("downloading %s: unknown digest %q", url, want.Algo)
	}
	body, err := c.Open(ctx, url, 0)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	w := &errWriter{w: io.MultiWriter(out, h)}
	n, err := io.Copy(w, body)
	if w.err != nil {
		return nil, fmt.Errorf("writing %s (downloading %s): %w", path, url, w.err)
	}
	if err != nil {
		return nil, err // the body's errors name the URL
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want.Hex != "" && got != want.Hex {
		return nil, &DigestError{URL: url, Algo: want.Algo, Want: want.Hex, Got: got}
	}
	if err := out.Commit(mode); err != nil {
		return nil, err
	}
	return &Downloaded{Path: path, Digest: got, Bytes: n}, nil
}

// errWriter remembers a write failure, so it is told apart from a network one.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}
