package fetch

import (
	"bufio"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/dsnet/compress/bzip2"
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

// ctxReader ends a read loop once ctx is done, so Ctrl-C stops it promptly: on the source, where
// a cached file is read with no context, and on the decoder's output, which well-compressed
// data keeps producing long after its last read of the source.
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

// decodeError is a download whose bytes are complete but do not decompress.
type decodeError struct {
	File string
	Err  error
}

func (e *decodeError) Error() string {
	return fmt.Sprintf("%s is not valid bzip2 (truncated or corrupt): %v", e.File, e.Err)
}
func (e *decodeError) Unwrap() error { return e.Err }

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
// bytes written to out; once ctx is done it stops with ctx's error.
func stream(ctx context.Context, src io.Reader, decode bool, out io.Writer) (digest string, written int64, err error) {
	h := sha512.New()
	rec := &errRecorder{r: ctxReader{ctx, src}}
	hashed := io.TeeReader(rec, h)
	buf := make([]byte, copyBuf)
	var decodeErr error
	if decode {
		written, err = decodeBzip2(ctx, out, hashed, buf)
		switch {
		case rec.err != nil:
			return "", written, rec.err
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return "", written, err
		case errors.As(err, new(*writeError)):
			return "", written, err
		case err != nil:
			decodeErr = &decodeError{Err: err}
		}
	} else if written, err = io.CopyBuffer(out, hashed, buf); err != nil {
		return "", written, err
	}
	// Finish hashing, after a decode error too: the caller can then tell a tampered download from
	// a damaged original. (What the decoder's buffer took was hashed as it was taken.)
	if _, err := io.CopyBuffer(io.Discard, hashed, buf); err != nil {
		return "", written, err
	}
	return hex.EncodeToString(h.Sum(nil)), written, decodeErr
}

// decodeBzip2 decodes the bzip2 streams of r (lbzip2's one stream of many blocks, or several
// streams) into w with github.com/dsnet/compress/bzip2, on this goroutine; every block and stream
// CRC is checked, and data after the last stream is an error. The bytes are not verified yet
// while they are decoded, so a decoder panic on hostile input is an error, not a crash.
func decodeBzip2(ctx context.Context, w io.Writer, r io.Reader, buf []byte) (written int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bzip2 decoder failed: %v", p)
		}
	}()
	dec, err := bzip2.NewReader(bufio.NewReaderSize(r, 64<<10), nil)
	if err != nil {
		return 0, err
	}
	written, err = io.CopyBuffer(w, ctxReader{ctx, dec}, buf)
	if cerr := dec.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return written, err
}
