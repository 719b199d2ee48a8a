package qcow2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Stream produces a qcow2 image of a source without a temporary file: the layout comes from the
// source's hole map alone, so the length is known before the first byte. Every cluster that
// overlaps source data is stored (zeros included) and nothing is compressed.
// Stream is an io.Reader, io.ReaderAt, io.Seeker and io.WriterTo; ReadAt is safe for concurrent use.
type Stream struct {
	src     vdisk.Disk
	meta    []byte
	runs    []streamRun
	cs      int64
	dataOff int64
	size    int64
	pos     int64
}

// streamRun: data clusters [k, k+n) of the image hold virtual clusters [vc, vc+n).
type streamRun struct{ k, vc, n int64 }

// NewStreamWriter prepares a qcow2 stream of the raw image file raw (read with SEEK_DATA/SEEK_HOLE).
func NewStreamWriter(raw *os.File) (*Stream, error) {
	src, err := vdisk.NewFile(raw, false)
	if err != nil {
		return nil, err
	}
	return newStream(context.Background(), src)
}

// newStream prepares a compat 1.1 qcow2 stream of src.
func newStream(ctx context.Context, src vdisk.Disk) (*Stream, error) {
	bits := uint(defaultClusterBits)
	runs, clusters, err := scanRuns(ctx, src, bits)
	if err != nil {
		return nil, err
	}
	l := planLayout(src.Size(), bits, 3, runs, clusters)
	s := &Stream{src: src, cs: l.cs, dataOff: l.dataOff, size: l.dataOff + clusters*l.cs}
	k := int64(0)
	for _, r := range runs {
		s.runs = append(s.runs, streamRun{k: k, vc: r.vc, n: r.n})
		for i := range r.n {
			host := l.dataOff + (k+i)*l.cs
			l.setL2(r.vc+i, uint64(host)|flagCopied)
		}
		k += r.n
	}
	if clusters > 0 {
		if err := l.incRef(l.dataOff/l.cs, l.dataOff/l.cs+clusters-1); err != nil {
			return nil, err
		}
	}
	if s.meta, err = l.metadata(); err != nil {
		return nil, err
	}
	return s, nil
}

// Size is the exact length of the qcow2 image.
func (s *Stream) Size() int64 { return s.size }

// ReadAt returns the image bytes at off.
func (s *Stream) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("qcow2: negative offset")
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		if pos >= s.size {
			return done, io.EOF
		}
		if pos < s.dataOff {
			done += copy(p[done:], s.meta[pos:])
			continue
		}
		k := (pos - s.dataOff) / s.cs
		i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].k+s.runs[i].n > k })
		r := s.runs[i]
		vpos := (r.vc+k-r.k)*s.cs + (pos-s.dataOff)%s.cs
		n := int(min(int64(len(p)-done), (r.k+r.n-k)*s.cs-(pos-s.dataOff)%s.cs))
		if err := readFull(s.src, p[done:done+n], vpos); err != nil {
			return done, fmt.Errorf("qcow2 stream: %w", err)
		}
		done += n
	}
	return done, nil
}

// Read implements io.Reader.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.ReadAt(p, s.pos)
	s.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker, so an HTTP client can rewind the body on a retry.
func (s *Stream) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += s.pos
	case io.SeekEnd:
		offset += s.size
	}
	if offset < 0 {
		return s.pos, errors.New("qcow2: seek before the start")
	}
	s.pos = offset
	return offset, nil
}

// WriteTo writes the rest of the image to w, a chunk at a time (the wrappers keep
// io.CopyBuffer from calling back here or handing the copy to w's ReadFrom).
func (s *Stream) WriteTo(w io.Writer) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{s}, make([]byte, chunkBytes))
}
