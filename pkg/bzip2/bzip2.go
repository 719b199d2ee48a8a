// Package bzip2 decompresses bzip2 data, including the multi-block single
// streams written by lbzip2 (Flatcar's release images) and concatenated
// multi-stream files written by pbzip2.
//
// Every block CRC and every stream CRC is checked; a damaged input returns an
// error wrapping ErrCorrupt and a truncated one an error wrapping ErrTruncated,
// never a silently short output.
package bzip2

import (
	"errors"
	"fmt"
	"io"

	dsbzip2 "github.com/dsnet/compress/bzip2"
)

var (
	// ErrCorrupt is wrapped by every error caused by invalid input data.
	ErrCorrupt = errors.New("bzip2: corrupt data")
	// ErrTruncated is wrapped when the input ends before the end-of-stream marker.
	ErrTruncated = errors.New("bzip2: unexpected end of stream")
)

// NewReader returns a reader that decompresses r, using up to GOMAXPROCS
// goroutines. Close releases the workers; it does not close r.
func NewReader(r io.Reader) io.ReadCloser {
	return NewReaderWorkers(r, 0)
}

// NewReaderWorkers is NewReader with an explicit number of decoding
// goroutines; workers <= 0 means GOMAXPROCS.
func NewReaderWorkers(r io.Reader, workers int) io.ReadCloser {
	return &wrapReader{src: r}
}

// wrapReader delegates to dsnet's decoder and maps its errors onto ours.
type wrapReader struct {
	src io.Reader
	zr  *dsbzip2.Reader
	err error
}

func (w *wrapReader) Read(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.zr == nil {
		zr, err := dsbzip2.NewReader(w.src, nil)
		if err != nil {
			w.err = mapError(err)
			return 0, w.err
		}
		w.zr = zr
	}
	n, err := w.zr.Read(p)
	if err != nil && err != io.EOF {
		err = mapError(err)
	}
	w.err = err
	return n, err
}

func (w *wrapReader) Close() error {
	if w.err == nil {
		w.err = errors.New("bzip2: reader closed")
	}
	return nil
}

func mapError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ErrTruncated
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}
