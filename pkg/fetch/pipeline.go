package fetch

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/flatcar-capo/flatcar-capo/pkg/bzip2"
)

// copyBuf is large enough that the per-call overhead of the tee chain does not show.
const copyBuf = 1 << 20

// errRecorder remembers the first error its source returned other than EOF, so a network
// failure seen through the bzip2 decoder is reported as a network failure, not as corrupt data.
type errRecorder struct {
	r   io.Reader
	err error
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// DecodeError is a download whose bytes are complete but do not decompress.
type DecodeError struct {
	File string
	Err  error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s is not valid bzip2 (truncated or corrupt): %v", e.File, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// writeError is a failure to write the output (disk full, I/O error).
type writeError struct {
	Path string
	Err  error
}

func (e *writeError) Error() string { return fmt.Sprintf("writing %s: %v", e.Path, e.Err) }
func (e *writeError) Unwrap() error { return e.Err }

// pathWriter names its file in write errors.
type pathWriter struct {
	w    io.Writer
	path string
}

func (p pathWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil {
		err = &writeError{Path: p.path, Err: err}
	}
	return n, err
}

// stream reads the whole artifact from src exactly once, hashing every byte with SHA512 and
// either copying it to out or bzip2-decoding it into out. It reads src to its end even after the
// decoder stops, so the digest always covers the whole file. It returns the hex digest and the
// bytes written to out.
func stream(src io.Reader, decode bool, out io.Writer) (digest string, written int64, err error) {
	h := sha512.New()
	rec := &errRecorder{r: src}
	hashed := io.TeeReader(rec, h)
	buf := make([]byte, copyBuf)
	var decodeErr error
	if decode {
		dec := bzip2.NewReader(hashed)
		written, err = io.CopyBuffer(out, dec, buf)
		dec.Close()
		switch {
		case rec.err != nil:
			return "", written, rec.err
		case errors.As(err, new(*writeError)):
			return "", written, err
		case err != nil:
			decodeErr = &DecodeError{Err: err}
		}
	} else if written, err = io.CopyBuffer(out, hashed, buf); err != nil {
		return "", written, err
	}
	// Finish hashing, after a decode error too: the caller can then tell a tampered download from
	// a damaged original.
	if _, err := io.CopyBuffer(io.Discard, hashed, buf); err != nil {
		return "", written, err
	}
	return hex.EncodeToString(h.Sum(nil)), written, decodeErr
}
