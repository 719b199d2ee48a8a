package bzip2

import (
	"errors"
	"io"
	"sync"
)

const (
	readChunk = 1 << 20
	// maxJobBytes bounds the compressed size of one block: 900000 symbols of
	// at most 20 bits, plus selectors and tables, fit well within it. Input
	// with no magic for this long cannot be valid.
	maxJobBytes = 2600000
)

// job is the input between two consecutive magic candidates, decoded by a
// worker when it starts with a block magic. Candidates can be false (the
// magic occurs by chance inside block data); the consumer skips those.
type job struct {
	start int64  // absolute bit offset of the candidate; -1 for the stream head
	base  int64  // absolute byte offset of data[0]
	data  []byte // input from start up to the end of the next candidate's magic
	eos   bool   // start is an end-of-stream magic
	fail  error  // no data: the input failed (I/O error, or no magic in maxJobBytes)
	done  chan struct{}
	res   blockResult
}

var dataPool = sync.Pool{New: func() any { return new([]byte) }}

func getBuf(n int) []byte {
	p := dataPool.Get().(*[]byte)
	if cap(*p) < n {
		return make([]byte, n, n+n/8)
	}
	return (*p)[:n]
}

func putBuf(b []byte) {
	if cap(b) > 0 {
		dataPool.Put(&b)
	}
}

// split reads the input, cuts it at every magic candidate and hands the
// pieces, in order, to the workers and to the consumer.
func (z *reader) split() {
	defer z.wg.Done()
	defer close(z.ordered)
	defer close(z.work)
	buf := make([]byte, 0, 4*readChunk)
	var base int64             // absolute offset of buf[0]
	var scanned int64          // bytes before this offset have been scanned
	prev := candidate{bit: -1} // the candidate the pending job starts at
	from := func() int64 { return max(prev.bit, 0) >> 3 }

	emit := func(end int64) bool {
		lo := from() - base
		data := getBuf(int(end - base - lo))
		copy(data, buf[lo:end-base])
		j := &job{start: prev.bit, base: from(), data: data, eos: prev.eos, done: closedChan}
		decode := prev.bit >= 0 && !prev.eos
		if decode {
			j.done = make(chan struct{})
		}
		return z.send(j, decode)
	}
	for {
		select {
		case <-z.quit:
			return
		default:
		}
		// Keep the unfinished job's bytes, then read more.
		if keep := from() - base; keep > 0 {
			n := copy(buf, buf[keep:])
			buf = buf[:n]
			base += keep
		}
		if cap(buf)-len(buf) < readChunk {
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		n, err := io.ReadAtLeast(z.src, buf[len(buf):cap(buf)], 1)
		buf = buf[:len(buf)+n]
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			z.send(&job{start: -2, fail: err, done: closedChan}, false)
			return
		}
		// A magic needs 7 bytes (6 when byte aligned); keep the last 6
		// unscanned until more input or the end shows what follows.
		to := base + int64(len(buf)) - 6
		if eof {
			to = base + int64(len(buf))
		}
		ok := true
		z.scan(buf, base, scanned, to, func(c candidate) {
			if ok {
				ok = emit((c.bit + 48 + 7) >> 3)
				prev = c
			}
		})
		if !ok {
			return
		}
		scanned = max(scanned, to)
		if eof {
			emit(base + int64(len(buf)))
			return
		}
		if base+int64(len(buf))-from() > maxJobBytes {
			z.send(&job{start: -2, fail: corruptf("no bzip2 block boundary within %d bytes", maxJobBytes), done: closedChan}, false)
			return
		}
	}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// send queues j for the consumer and, if it is a block, for a worker. It
// reports false when the reader was closed.
func (z *reader) send(j *job, decode bool) bool {
	if decode {
		select {
		case z.work <- j:
		case <-z.quit:
			return false
		}
	}
	select {
	case z.ordered <- j:
		return true
	case <-z.quit:
		return false
	}
}

// worker decodes queued blocks.
func (z *reader) worker() {
	defer z.wg.Done()
	d := getDecoder()
	defer putDecoder(d)
	for {
		select {
		case j, ok := <-z.work:
			if !ok {
				return
			}
			skip := uint(j.start - j.base*8)
			j.res = d.decodeBlock(j.data, skip, getBuf(0))
			close(j.done)
		case <-z.quit:
			return
		}
	}
}
