// Package bzip2 decompresses bzip2 data in parallel, including the
// multi-block single streams written by lbzip2 (Flatcar's release images)
// and concatenated streams written by pbzip2.
//
// The input is cut at every 48-bit block magic (found at any bit offset),
// blocks are decoded by GOMAXPROCS workers and their output is returned in
// order, with a bounded number of blocks in flight. Every block CRC and every
// stream CRC is checked before data is returned: a damaged input yields an
// error wrapping ErrCorrupt and a truncated one an error wrapping
// ErrTruncated, never silently short output. Unlike the bzip2 tool, data
// after the last stream is an error, not ignored. Randomised blocks (written
// only by bzip2 0.9.0 and older) are rejected.
//
// Memory: about 5 MB per worker plus a few blocks in flight (1-3 MB each,
// whatever the compression ratio).
//
// It is ours, not github.com/dsnet/compress/bzip2 or compress/bzip2, for a
// whole-command reason (docs/architecture.md, "Hand-written codecs"):
// `flatcar-capo fetch` of a 148 MB lbzip2'd release from 127.0.0.1 took
// 9.5 s wall and 8.2 s CPU with it, 15.4 s and 13.9 s with dsnet's (1.7x the
// CPU) and 33.6 s and 26.3 s with the standard library's (3.2x), in the same
// run (2026-12-02, load ~6.5; scripts/bench/codecs.sh bzip2). Re-measure when
// either changes.
package bzip2

import (
	"errors"
	"io"
	"runtime"
	"sync"
)

const maxWorkers = 64

var (
	// ErrCorrupt is wrapped by every error caused by invalid input data.
	ErrCorrupt = errors.New("bzip2: corrupt data")
	// ErrTruncated is returned when the input ends before the end-of-stream marker.
	ErrTruncated = errors.New("bzip2: unexpected end of stream")
	errClosed    = errors.New("bzip2: reader closed")
)

// NewReader returns a reader that decompresses r using GOMAXPROCS
// goroutines. They exit at the end of the input or at the first error;
// Close stops them early. Close does not close r.
func NewReader(r io.Reader) io.ReadCloser {
	return NewReaderWorkers(r, 0)
}

// NewReaderWorkers is NewReader with an explicit number of decoding
// goroutines; workers <= 0 means GOMAXPROCS. Each worker holds about 5 MB,
// so at most maxWorkers are used.
func NewReaderWorkers(r io.Reader, workers int) io.ReadCloser {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, maxWorkers)
	return &reader{src: r, workers: workers, scan: scanMagics}
}

// reader is the consumer side: it walks the jobs in input order, skips false
// magic candidates, checks the stream structure and CRCs and serves output.
type reader struct {
	src     io.Reader
	workers int
	scan    func(buf []byte, base, from, to int64, emit func(candidate)) // scanMagics; tests add false magics

	started   bool
	work      chan *job
	ordered   chan *job
	quit      chan struct{}
	stopOnce  sync.Once
	closeOnce sync.Once
	wg        sync.WaitGroup

	cur     *job        // job being consumed; jobs before it are released
	ahead   []*job      // jobs pulled from ordered beyond cur
	ended   bool        // ordered is closed and drained into ahead
	out     blockOutput // decoded block being returned
	expect  int64       // bit offset of the next block or end-of-stream magic
	level   int         // block size of the current stream, in 100 kB
	crc     uint32      // combined CRC of the current stream's blocks so far
	err     error
	retryer *decoder
}

func (z *reader) start() {
	z.started = true
	z.work = make(chan *job, z.workers)
	z.ordered = make(chan *job, z.workers+1)
	z.quit = make(chan struct{})
	z.wg.Add(z.workers + 1)
	for i := 0; i < z.workers; i++ {
		go z.worker()
	}
	go z.split()
}

func (z *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for z.out.done() {
		if z.err != nil {
			return 0, z.err
		}
		if z.err = z.advance(); z.err != nil && z.err != io.EOF {
			z.stop() // nothing more will be read: free the goroutines
		}
	}
	return z.out.read(p), nil
}

// WriteTo lets io.Copy write large pieces. The wrappers hide WriteTo and ReadFrom so
// io.CopyBuffer loops over Read with this buffer instead of calling back here.
func (z *reader) WriteTo(w io.Writer) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{z}, make([]byte, 256<<10))
}

// stop tells the splitter and the workers to exit.
func (z *reader) stop() {
	z.stopOnce.Do(func() {
		if z.started {
			close(z.quit)
		}
	})
}

// Close stops the workers and waits until the reading goroutine no longer
// uses the source (an in-progress Read of it must return first), so the
// caller may go on reading the source. A Read after Close fails.
func (z *reader) Close() error {
	z.closeOnce.Do(func() {
		z.stop()
		z.wg.Wait()
		if z.err == nil || z.err == io.EOF {
			z.err = errClosed
		}
		z.out = blockOutput{}
		if z.retryer != nil {
			putDecoder(z.retryer)
			z.retryer = nil
		}
	})
	return nil
}

// pull moves one job from the splitter to ahead; false at the end.
func (z *reader) pull() bool {
	if z.ended {
		return false
	}
	j, ok := <-z.ordered
	if !ok {
		z.ended = true
		return false
	}
	z.ahead = append(z.ahead, j)
	return true
}

// next releases the current job and makes the following one current.
func (z *reader) next() *job {
	if z.cur != nil {
		putBuf(z.cur.data)
		z.cur = nil
	}
	if len(z.ahead) == 0 && !z.pull() {
		return nil
	}
	z.cur = z.ahead[0]
	z.ahead = z.ahead[1:]
	return z.cur
}

// bytesAt copies up to n input bytes from absolute offset off, gathering
// them from the current and following jobs. A short result means the input
// ended (or failed: see the returned error).
func (z *reader) bytesAt(off int64, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for i := -1; len(out) < n; i++ {
		var j *job
		switch {
		case i < 0:
			j = z.cur
		case i < len(z.ahead):
			j = z.ahead[i]
		case z.pull():
			j = z.ahead[i]
		default:
			return out, nil
		}
		if j == nil {
			continue
		}
		if j.fail != nil {
			return out, j.fail
		}
		pos := off + int64(len(out))
		if pos >= j.base && pos < j.base+int64(len(j.data)) {
			take := min(int64(n-len(out)), j.base+int64(len(j.data))-pos)
			out = append(out, j.data[pos-j.base:pos-j.base+take]...)
		}
	}
	return out, nil
}

// advance processes input up to the next decoded block (setting z.out) or
// the end of the input (io.EOF).
func (z *reader) advance() error {
	if !z.started {
		z.start()
	}
	if z.cur != nil {
		putBuf(z.cur.res.out.pre)
		z.cur.res.out = blockOutput{}
	}
	for {
		j := z.next()
		switch {
		case j == nil:
			return ErrTruncated
		case j.fail != nil:
			return j.fail
		case j.start == -1:
			if err := z.streamHeader(0); err != nil {
				if err == io.EOF {
					return ErrTruncated // empty input
				}
				return err
			}
		case j.start < z.expect:
			// A false magic inside the block or stream trailer before it.
			if j.done != closedChan {
				<-j.done
				putBuf(j.res.out.pre)
			}
		case j.start > z.expect:
			return corruptf("no block or end-of-stream marker at bit %d", z.expect)
		case j.eos:
			if err := z.streamEnd(j); err != nil {
				return err
			}
		default:
			<-j.done
			r := j.res
			if r.err == errNeedMore {
				putBuf(r.out.pre)
				r = z.retry(j)
				j.res = r
			}
			if r.err != nil {
				return r.err
			}
			if r.n > z.level*100000 {
				return corruptf("block of %d bytes exceeds the stream's %d00k block size", r.n, z.level)
			}
			if r.crc != r.want {
				return corruptf("block CRC mismatch at bit %d", j.start)
			}
			z.crc = streamCRC(z.crc, r.want)
			z.expect = j.start + r.bits
			z.out = r.out
			return nil
		}
	}
}

// streamHeader checks a "BZh1".."BZh9" header at byte off; io.EOF means the
// input ends exactly there.
func (z *reader) streamHeader(off int64) error {
	h, err := z.bytesAt(off, 4)
	if err != nil {
		return err
	}
	if len(h) == 0 {
		return io.EOF
	}
	const magic = "BZh"
	for i := 0; i < len(h) && i < 3; i++ {
		if h[i] != magic[i] {
			if off == 0 {
				return corruptf("not bzip2 data")
			}
			return corruptf("trailing garbage after bzip2 stream at byte %d", off)
		}
	}
	if len(h) < 4 {
		return ErrTruncated
	}
	if h[3] < '1' || h[3] > '9' {
		return corruptf("bad block size %q", h[3])
	}
	z.level = int(h[3] - '0')
	z.crc = 0
	z.expect = (off + 4) * 8
	return nil
}

// streamEnd checks the combined CRC after an end-of-stream magic and the
// header of a following stream, if any.
func (z *reader) streamEnd(j *job) error {
	crcBit := j.start + 48
	b, err := z.bytesAt(crcBit>>3, 5)
	if err != nil {
		return err
	}
	if len(b) < 5 && (crcBit&7)+32 > int64(len(b))*8 {
		return ErrTruncated
	}
	var w uint64
	for i := 0; i < 5; i++ {
		w <<= 8
		if i < len(b) {
			w |= uint64(b[i])
		}
	}
	stored := uint32(w >> (8 - crcBit&7))
	if stored != z.crc {
		return corruptf("stream CRC mismatch at bit %d", j.start)
	}
	err = z.streamHeader((crcBit + 32 + 7) >> 3)
	if err == io.EOF {
		return io.EOF
	}
	return err
}

// retry decodes a block that ran past its job's data (a false magic cut it
// short) with all the input it may span.
func (z *reader) retry(j *job) blockResult {
	data, err := z.bytesAt(j.base, maxJobBytes)
	if z.retryer == nil {
		z.retryer = getDecoder()
	}
	r := z.retryer.decodeBlock(data, uint(j.start-j.base*8), getBuf(0))
	if r.err == errNeedMore {
		switch {
		case err != nil:
			r.err = err
		case len(data) < maxJobBytes:
			r.err = ErrTruncated
		default:
			r.err = corruptf("block at bit %d longer than %d bytes", j.start, maxJobBytes)
		}
	}
	return r
}

var decoderPool sync.Pool

func getDecoder() *decoder {
	if d, ok := decoderPool.Get().(*decoder); ok {
		return d
	}
	return newDecoder()
}

func putDecoder(d *decoder) { decoderPool.Put(d) }
