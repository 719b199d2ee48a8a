package squashfs

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// compressor makes one encoder per goroutine.
type compressor interface {
	id() uint16
	new() encoder
}

// encoder compresses one block into dst; false means the result is not smaller than src and
// the block is to be stored uncompressed.
type encoder interface {
	compress(dst, src []byte) ([]byte, bool)
}

func newCompressor(name string, level, blockSize int) (compressor, error) {
	switch name {
	case "", "gzip":
		if level == 0 {
			level = 9
		}
		if level < 1 || level > 9 {
			return nil, fmt.Errorf("gzip compression level %d: use 1 (fastest) to 9 (smallest)", level)
		}
		return gzipComp{level}, nil
	case "zstd":
		if level == 0 {
			level = 15
		}
		if level < 1 || level > 22 {
			return nil, fmt.Errorf("zstd compression level %d: use 1 to 22", level)
		}
		return zstdComp{level, blockSize}, nil
	}
	return nil, fmt.Errorf("compression %q is not supported: use gzip or zstd", name)
}

// gzip in squashfs means zlib streams (RFC 1950), what the kernel's zlib_inflate expects.
type gzipComp struct{ level int }

func (g gzipComp) id() uint16 { return 1 }
func (g gzipComp) new() encoder {
	e := &zlibEnc{}
	e.w, _ = zlib.NewWriterLevel(&e.buf, g.level) // level checked in newCompressor
	return e
}

type zlibEnc struct {
	buf bytes.Buffer
	w   *zlib.Writer
}

func (e *zlibEnc) compress(dst, src []byte) ([]byte, bool) {
	e.buf = *bytes.NewBuffer(dst)
	e.w.Reset(&e.buf)
	if _, err := e.w.Write(src); err != nil {
		return dst, false
	}
	if err := e.w.Close(); err != nil {
		return dst, false
	}
	out := e.buf.Bytes()
	return out, len(out) < len(src)
}

type zstdComp struct{ level, window int }

func (z zstdComp) id() uint16 { return 6 }
func (z zstdComp) new() encoder {
	// The kernel's zstd reader allows a window of one block: stay within it. No checksum, as
	// mksquashfs writes none (squashfs checks nothing itself; the kernel would verify it).
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(z.level)),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(z.window), zstd.WithEncoderCRC(false))
	return zstdEnc{enc}
}

type zstdEnc struct{ e *zstd.Encoder }

func (z zstdEnc) compress(dst, src []byte) ([]byte, bool) {
	out := z.e.EncodeAll(src, dst)
	return out, len(out) < len(src)
}
