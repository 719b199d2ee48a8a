package qcow2

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/flate"

	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Options tune Write.
type Options struct {
	Compress bool              // deflate clusters (in parallel); clusters that do not shrink are stored as is
	Version  uint32            // 3 (compat 1.1, the default) or 2 (compat 0.10)
	Workers  int               // parallel workers; default GOMAXPROCS
	Progress progress.Reporter // told the bytes of source data processed; nil: none
	// Hash, when set on uncompressed output, is given every byte of the file in file order as
	// it is written, so a caller gets the file's digest without reading it again. The layout
	// is then planned from the source's extents alone (their all-zero clusters are stored, not
	// dropped), which puts the tables first and writes the file front to back once.
	Hash io.Writer
}

// Target is what Write writes to: an empty file.
type Target interface {
	io.WriterAt
	Truncate(size int64) error
}

const (
	chunkBytes = 1 << 20 // source bytes per pipeline job
	minReaders = 4       // reads in flight at least, whatever the CPU count
	// qemu decodes compressed clusters with a 4 KiB deflate window (inflateInit2 with -12).
	deflateWindow = 1 << 12
)

// Write writes src as a qcow2 image with 64 KiB clusters to dst. Holes of the source and
// all-zero clusters are not stored. The source is read once, sequentially; with Compress the
// clusters are deflated by a pool of workers and written in order.
func Write(ctx context.Context, src vdisk.Disk, dst Target, opts Options) error {
	opts.Version = cmp.Or(opts.Version, 3)
	if opts.Version != 2 && opts.Version != 3 {
		return fmt.Errorf("qcow2: cannot write version %d (use 2 or 3)", opts.Version)
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	opts.Progress = cmp.Or(opts.Progress, progress.None)
	bits := uint(defaultClusterBits)
	runs, clusters, err := scanRuns(ctx, src, bits)
	if err != nil {
		return err
	}
	l := planLayout(src.Size(), bits, opts.Version, runs, clusters)
	if opts.Hash != nil && !opts.Compress {
		return writeInOrder(ctx, src, dst, opts, l, runs)
	}
	w := &dataWriter{l: l, out: &seqWriter{w: dst}, next: l.dataOff / l.cs}
	if err := runPipeline(ctx, src, runs, opts, nil, w.write); err != nil {
		return err
	}
	if err := w.out.flush(); err != nil {
		return err
	}
	_, err = writeTables(dst, l, w.next*l.cs)
	return err
}

// writeTables sets the image's length, then writes the header and tables of l at its start.
// The length comes first (CopyToRaw says why: appending writes wait for ext4's journal).
func writeTables(dst Target, l *layout, length int64) ([]byte, error) {
	meta, err := l.metadata()
	if err != nil {
		return nil, err
	}
	if err := dst.Truncate(length); err != nil {
		return nil, fmt.Errorf("qcow2: setting the image length: %w", err)
	}
	if _, err := dst.WriteAt(meta, 0); err != nil {
		return nil, fmt.Errorf("qcow2: writing the tables: %w", err)
	}
	return meta, nil
}

type clusterKind uint8

const (
	storeZero clusterKind = iota
	storePlain
	storeCompressed
)

// job is a run of up to chunkBytes of source clusters going through the pipeline.
type job struct {
	vc    int64
	n     int
	nth   int64 // clusters of the runs before this job's first
	in    []byte
	kinds []clusterKind
	spans [][2]int // compressed bytes of cluster i: out[spans[i][0]:spans[i][1]]
	out   bytes.Buffer
	err   error
	done  chan struct{}
}

// runPipeline reads the runs in order, classifies (and maybe compresses) clusters on the
// workers, calls place (when set) on the worker, and hands the jobs to write in source order.
func runPipeline(ctx context.Context, src vdisk.Disk, runs []run, opts Options, place, write func(*job) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs := int64(1) << defaultClusterBits
	per := max(1, chunkBytes/cs)
	inflight := 2*max(opts.Workers, minReaders) + 2
	free := make(chan *job, inflight)
	for range inflight {
		free <- &job{in: make([]byte, per*cs), kinds: make([]clusterKind, per), spans: make([][2]int, per)}
	}
	work := make(chan *job, inflight)
	ordered := make(chan *job, inflight)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		defer close(ordered)
		defer close(work)
		nth := int64(0)
		for _, r := range runs {
			for vc := r.vc; vc < r.vc+r.n; vc += per {
				var j *job
				select {
				case j = <-free:
				case <-ctx.Done():
					return
				}
				j.vc, j.n, j.nth, j.err, j.done = vc, int(min(per, r.vc+r.n-vc)), nth, nil, make(chan struct{})
				nth += int64(j.n)
				work <- j
				ordered <- j
			}
		}
	}()
	// Workers read their job's data themselves: several reads in flight keep a cold disk busy
	// (a single reader waits for each read in turn), and reading overlaps classifying. The writes
	// stay on one goroutine, in order: spreading them over a pool measured slower here.
	for range max(opts.Workers, minReaders) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fw *flate.Writer
			if opts.Compress {
				fw, _ = flate.NewWriterWindow(nil, deflateWindow)
			}
			for j := range work {
				if ctx.Err() == nil {
					if j.err = readFull(src, j.in[:int64(j.n)*cs], j.vc*cs); j.err == nil {
						classify(j, cs, fw)
						if place != nil {
							j.err = place(j)
						}
					}
				}
				close(j.done)
			}
		}()
	}
	err := func() error {
		for j := range ordered {
			select {
			case <-j.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := cmp.Or(j.err, ctx.Err()); err != nil {
				return err
			}
			if err := write(j); err != nil {
				return err
			}
			opts.Progress.Add(int64(j.n) * cs)
			free <- j
		}
		return ctx.Err()
	}()
	cancel()
	for range ordered { // let the producer finish
	}
	wg.Wait()
	return err
}

// readFull reads p at off, zero-filling past the end of the source.
func readFull(src vdisk.Disk, p []byte, off int64) error {
	n, err := src.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == io.EOF && off+int64(n) >= src.Size() {
		clear(p[n:])
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading source at offset %d: %w", off+int64(n), err)
}

// classify marks each cluster of j zero, plain or compressed (deflating it when fw is set).
func classify(j *job, cs int64, fw *flate.Writer) {
	j.out.Reset()
	for i := range j.n {
		c := j.in[int64(i)*cs : int64(i+1)*cs]
		switch {
		case vdisk.IsZero(c):
			j.kinds[i] = storeZero
		case fw == nil:
			j.kinds[i] = storePlain
		default:
			start := j.out.Len()
			fw.Reset(&j.out)
			_, err := fw.Write(c)
			if err == nil {
				err = fw.Close()
			}
			if err != nil || int64(j.out.Len()-start) > cs-sectorSize {
				j.out.Truncate(start)
				j.kinds[i] = storePlain
				continue
			}
			j.kinds[i] = storeCompressed
			j.spans[i] = [2]int{start, j.out.Len()}
		}
	}
}

// dataWriter places the clusters of each job in the data area and records them in the tables.
type dataWriter struct {
	l    *layout
	out  *seqWriter
	next int64 // next free host cluster
	cpos int64 // where the next compressed cluster may go (0: nowhere yet)
	cend int64 // end of the clusters allocated for compressed data
}

func (w *dataWriter) write(j *job) error {
	l, cs := w.l, w.l.cs
	for i := 0; i < j.n; {
		switch j.kinds[i] {
		case storeZero:
			i++
		case storePlain:
			k := i + 1
			for k < j.n && j.kinds[k] == storePlain {
				k++
			}
			host := w.next
			w.next += int64(k - i)
			if err := w.out.writeAt(j.in[int64(i)*cs:int64(k)*cs], host*cs); err != nil {
				return err
			}
			for c := i; c < k; c++ {
				h := host + int64(c-i)
				l.setL2(j.vc+int64(c), uint64(h*cs)|flagCopied)
				if err := l.incRef(h, h); err != nil {
					return err
				}
			}
			i = k
		case storeCompressed:
			data := j.out.Bytes()[j.spans[i][0]:j.spans[i][1]]
			off := w.placeCompressed(int64(len(data)))
			if err := w.out.writeAt(data, off); err != nil {
				return err
			}
			end := (off + int64(len(data)) + sectorSize - 1) &^ (sectorSize - 1)
			sectors := (end - off&^(sectorSize-1)) / sectorSize
			shift := 62 - (l.bits - 8)
			l.setL2(j.vc+int64(i), flagCompress|uint64(sectors-1)<<shift|uint64(off))
			if err := l.incRef(off/cs, (end-1)/cs); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// placeCompressed returns the offset for n compressed bytes: packed right after the previous
// compressed cluster when the space there is free or can grow, else in fresh clusters.
func (w *dataWriter) placeCompressed(n int64) int64 {
	cs := w.l.cs
	if w.cpos == 0 || (w.cpos+n > w.cend && w.cend != w.next*cs) {
		w.cpos, w.cend = w.next*cs, w.next*cs
	}
	if w.cpos+n > w.cend {
		grow := ceilDiv(w.cpos+n-w.cend, cs)
		w.next += grow
		w.cend += grow * cs
	}
	off := w.cpos
	w.cpos += n
	return off
}

// seqWriter coalesces adjacent small writes (compressed clusters) into large ones.
type seqWriter struct {
	w   io.WriterAt
	off int64
	buf []byte
}

func (s *seqWriter) writeAt(p []byte, off int64) error {
	if len(s.buf) > 0 && (off != s.off+int64(len(s.buf)) || len(s.buf)+len(p) > chunkBytes) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if len(s.buf) == 0 && len(p) >= chunkBytes/2 {
		if _, err := s.w.WriteAt(p, off); err != nil {
			return fmt.Errorf("qcow2: writing data: %w", err)
		}
		return nil
	}
	if len(s.buf) == 0 {
		s.off = off
	}
	s.buf = append(s.buf, p...)
	return nil
}

func (s *seqWriter) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.WriteAt(s.buf, s.off)
	s.buf = s.buf[:0]
	if err != nil {
		return fmt.Errorf("qcow2: writing data: %w", err)
	}
	return nil
}

// writeInOrder writes the tables, then every cluster of the runs, hashing the file in order.
// Every cluster's place is planned, so the workers write their own jobs (taking turns, past
// the page cache where the file allows: directWriter) while the in-order goroutine only
// hashes: the hash, the writes and the decode of a compressed source overlap instead of the
// hash waiting for each write.
func writeInOrder(ctx context.Context, src vdisk.Disk, dst Target, opts Options, l *layout, runs []run) error {
	cs := l.cs
	first := l.dataOff / cs
	host := first
	for _, r := range runs {
		for vc := r.vc; vc < r.vc+r.n; vc++ {
			l.setL2(vc, uint64(host*cs)|flagCopied)
			if err := l.incRef(host, host); err != nil {
				return err
			}
			host++
		}
	}
	meta, err := writeTables(dst, l, host*cs)
	if err != nil {
		return err
	}
	opts.Hash.Write(meta)
	direct := newDirectWriter(dst)
	defer direct.off()
	place := func(j *job) error {
		if err := direct.writeAt(j.in[:int64(j.n)*cs], (first+j.nth)*cs); err != nil {
			return fmt.Errorf("qcow2: writing data: %w", err)
		}
		return nil
	}
	hashed := first
	hash := func(j *job) error {
		opts.Hash.Write(j.in[:int64(j.n)*cs])
		hashed += int64(j.n)
		return nil
	}
	if err := runPipeline(ctx, src, runs, opts, place, hash); err != nil {
		return err
	}
	if hashed != host {
		return fmt.Errorf("qcow2: internal error: wrote %d clusters, planned %d", hashed, host)
	}
	return nil
}
