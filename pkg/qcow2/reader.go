package qcow2

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

const (
	offsetMask    = 0x00fffffffffffe00 // bits 9-55: host offset in L1/L2/refcount table entries
	l1Reserved    = 0x7f000000000001ff
	l2Reserved    = 0x3f000000000001fe
	flagCopied    = 1 << 63
	flagCompress  = 1 << 62
	flagZero      = 1 << 0
	sectorSize    = 512
	cacheBytes    = 8 << 20 // per cache: L2 tables, refcount blocks, decoded compressed clusters
	minCacheItems = 2
	maxCacheItems = 256
)

type kind uint8

const (
	kindUnallocated kind = iota
	kindZero
	kindData
	kindCompressed
)

// mapping is where one virtual cluster lives.
type mapping struct {
	kind  kind
	host  int64 // file offset of the data (compressed: of the compressed bytes)
	csize int64 // compressed: bytes to read from host
}

// Reader is a random-access view of a qcow2 image's virtual disk. It is safe for concurrent use.
type Reader struct {
	r         io.ReaderAt
	fileSize  int64
	h         Header
	cs        int64
	bits      uint
	l1        []uint64
	reftable  []uint64
	checkRefs bool // refcounts are trusted unless the image is marked dirty (lazy refcounts)

	csizeShift uint
	csizeMask  uint64
	coffMask   uint64

	mu        sync.Mutex
	l2        *lru[[]uint64]
	refblocks *lru[[]byte]
	clusters  *lru[[]byte]
}

// OpenFile opens the qcow2 image in f; the caller keeps ownership of f.
func OpenFile(f *os.File) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return open(f, st.Size())
}

// open reads and validates the header and tables of a qcow2 image of fileSize bytes.
func open(ra io.ReaderAt, fileSize int64) (*Reader, error) {
	var peek [headerV2Len]byte
	if n, err := ra.ReadAt(peek[:], 0); n < len(peek) {
		if n >= 4 && [4]byte(peek[:4]) == magic || err == io.EOF {
			return nil, corrupt("truncated header (%d bytes)", n)
		}
		return nil, fmt.Errorf("qcow2: reading the header: %w", err)
	}
	bits := binary.BigEndian.Uint32(peek[20:])
	n := min(4096, fileSize) // enough to report a bad cluster_bits
	if bits >= minClusterBits && bits <= maxClusterBits {
		n = min(int64(1)<<bits, fileSize)
	}
	first := make([]byte, max(n, headerV2Len))
	if k, err := ra.ReadAt(first, 0); int64(k) < n {
		return nil, fmt.Errorf("qcow2: reading the header: %w", err)
	}
	h, err := parseHeader(first[:n], fileSize)
	if err != nil {
		return nil, err
	}
	r := &Reader{r: ra, fileSize: fileSize, h: *h, cs: h.clusterSize(), bits: uint(h.ClusterBits),
		checkRefs: h.Incompatible&incompatDirty == 0}
	r.csizeShift = 62 - (r.bits - 8)
	r.csizeMask = 1<<(r.bits-8) - 1
	r.coffMask = 1<<r.csizeShift - 1
	items := min(maxCacheItems, max(minCacheItems, int(cacheBytes/r.cs)))
	r.l2, r.refblocks, r.clusters = newLRU[[]uint64](items), newLRU[[]byte](items), newLRU[[]byte](items)
	if r.l1, err = r.readTable(int64(h.L1TableOffset), int64(h.L1Size)); err != nil {
		return nil, fmt.Errorf("qcow2: reading the L1 table: %w", err)
	}
	rtLen := int64(h.RefcountTableClusters) * r.cs / 8
	if r.reftable, err = r.readTable(int64(h.RefcountTableOffset), rtLen); err != nil {
		return nil, fmt.Errorf("qcow2: reading the refcount table: %w", err)
	}
	for i, e := range r.l1 {
		if e&l1Reserved != 0 {
			return nil, corrupt("L1 entry %d (%#x) has reserved bits set", i, e)
		}
		if off := int64(e & offsetMask); off != 0 {
			if err := r.checkHostCluster("L2 table", off); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func (r *Reader) readTable(off, entries int64) ([]uint64, error) {
	b := make([]byte, entries*8)
	if n, err := r.r.ReadAt(b, off); n < len(b) {
		return nil, err
	}
	t := make([]uint64, entries)
	for i := range t {
		t[i] = binary.BigEndian.Uint64(b[i*8:])
	}
	return t, nil
}

// Header returns the image's header fields.
func (r *Reader) Header() Header { return r.h }

// Size is the virtual disk size.
func (r *Reader) Size() int64 { return int64(r.h.Size) }

// overlapsMetadata reports whether host cluster off is the header, the L1 or the refcount table.
func (r *Reader) overlapsMetadata(off int64) bool {
	in := func(start, n int64) bool { return off+r.cs > start && off < start+n }
	return off < r.cs || in(int64(r.h.L1TableOffset), int64(r.h.L1Size)*8) ||
		in(int64(r.h.RefcountTableOffset), int64(r.h.RefcountTableClusters)*r.cs)
}

// checkHostCluster validates a cluster an L1/L2 entry points to: inside the file, not on top of
// the image's own tables, and counted as used by the refcounts.
func (r *Reader) checkHostCluster(what string, off int64) error {
	switch {
	case off%r.cs != 0:
		return corrupt("%s at %#x is not cluster aligned", what, off)
	case off > r.fileSize-r.cs:
		return corrupt("%s at %#x points past the end of the file (%d bytes); the file is truncated", what, off, r.fileSize)
	case r.overlapsMetadata(off):
		return corrupt("%s at %#x overlaps the image header or tables", what, off)
	}
	return r.checkRefcount(what, off)
}

func (r *Reader) checkRefcount(what string, off int64) error {
	if !r.checkRefs {
		return nil
	}
	rc, err := r.refcount(off / r.cs)
	if err != nil {
		return err
	}
	if rc == 0 {
		return corrupt("%s at %#x is in use but its refcount is 0 (check it with 'qemu-img check')", what, off)
	}
	return nil
}

// refcount returns the refcount of a host cluster; r.mu must be held or the reader not yet shared.
func (r *Reader) refcount(cluster int64) (uint64, error) {
	width := int64(1) << r.h.RefcountOrder
	perBlock := r.cs * 8 / width
	idx := cluster / perBlock
	if idx >= int64(len(r.reftable)) {
		return 0, nil
	}
	e := r.reftable[idx]
	if e&0x1ff != 0 {
		return 0, corrupt("refcount table entry %d (%#x) has reserved bits set", idx, e)
	}
	boff := int64(e &^ 0x1ff)
	if boff == 0 {
		return 0, nil
	}
	block, ok := r.refblocks.get(boff)
	if !ok {
		if boff%r.cs != 0 || boff > r.fileSize-r.cs || boff < r.cs {
			return 0, corrupt("refcount block at %#x is outside the file or unaligned", boff)
		}
		block = make([]byte, r.cs)
		if _, err := r.r.ReadAt(block, boff); err != nil {
			return 0, fmt.Errorf("qcow2: reading refcount block at %#x: %w", boff, err)
		}
		r.refblocks.put(boff, block)
	}
	i := cluster % perBlock
	if width < 8 {
		per := 8 / width
		return uint64(block[i/per]>>((i%per)*width)) & (1<<width - 1), nil
	}
	b := block[i*width/8 : (i+1)*width/8]
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// l2Table returns the validated L2 table at off; r.mu must be held.
func (r *Reader) l2Table(off int64) ([]uint64, error) {
	if t, ok := r.l2.get(off); ok {
		return t, nil
	}
	t, err := r.readTable(off, r.cs/8)
	if err != nil {
		return nil, fmt.Errorf("qcow2: reading the L2 table at %#x: %w", off, err)
	}
	for _, e := range t {
		if _, err := r.decodeL2(e); err != nil {
			return nil, err
		}
	}
	r.l2.put(off, t)
	return t, nil
}

// decodeL2 turns an L2 entry into a mapping, rejecting entries that would read garbage.
func (r *Reader) decodeL2(e uint64) (mapping, error) {
	if e&flagCompress != 0 {
		coff := int64(e & r.coffMask)
		sectors := int64((e>>r.csizeShift)&r.csizeMask) + 1
		m := mapping{kind: kindCompressed, host: coff, csize: sectors*sectorSize - coff&(sectorSize-1)}
		switch {
		case coff >= r.fileSize:
			return m, corrupt("compressed cluster at %#x points past the end of the file (%d bytes); the file is truncated", coff, r.fileSize)
		case r.overlapsMetadata(coff &^ (r.cs - 1)):
			return m, corrupt("compressed cluster at %#x overlaps the image header or tables", coff)
		}
		return m, r.checkRefcount("compressed cluster", coff&^(r.cs-1))
	}
	if e&l2Reserved != 0 {
		return mapping{}, corrupt("L2 entry %#x has reserved bits set (unaligned cluster offset)", e)
	}
	off := int64(e & offsetMask)
	if r.h.Version >= 3 && e&flagZero != 0 {
		return mapping{kind: kindZero}, nil
	}
	if off == 0 {
		return mapping{kind: kindUnallocated}, nil
	}
	return mapping{kind: kindData, host: off}, r.checkHostCluster("data cluster", off)
}

// lookup maps virtual cluster vc.
func (r *Reader) lookup(vc int64) (mapping, error) {
	l1i := vc >> (r.bits - 3)
	if l1i >= int64(len(r.l1)) {
		return mapping{}, nil
	}
	l2off := int64(r.l1[l1i] & offsetMask)
	if l2off == 0 {
		return mapping{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.l2Table(l2off)
	if err != nil {
		return mapping{}, err
	}
	return r.decodeL2(t[vc&(r.cs/8-1)])
}

// ReadAt reads the virtual disk.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("qcow2: negative offset")
	}
	size := r.Size()
	if off >= size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > size-off {
		p, eof = p[:size-off], io.EOF
	}
	for done := 0; done < len(p); {
		pos := off + int64(done)
		vc, in := pos>>r.bits, pos&(r.cs-1)
		n := int(min(r.cs-in, int64(len(p)-done)))
		m, err := r.lookup(vc)
		if err != nil {
			return done, err
		}
		switch m.kind {
		case kindUnallocated, kindZero:
			clear(p[done : done+n])
		case kindCompressed:
			if int64(n) == r.cs { // whole clusters: decode in place, skip the cache
				if n, err = r.readCompressedRun(p[done:], vc, m); err != nil {
					return done, err
				}
				break
			}
			c, err := r.compressedCluster(vc, m)
			if err != nil {
				return done, err
			}
			copy(p[done:done+n], c[in:])
		case kindData:
			// Read host-contiguous clusters in one call.
			for done+n < len(p) {
				next, err := r.lookup(vc + 1)
				if err != nil || next.kind != kindData || next.host != m.host+(vc+1-pos>>r.bits)*r.cs {
					break
				}
				vc++
				n += int(min(r.cs, int64(len(p)-done-n)))
			}
			if _, err := r.r.ReadAt(p[done:done+n], m.host+in); err != nil {
				return done, fmt.Errorf("qcow2: reading data at %#x: %w", m.host+in, err)
			}
		}
		done += n
	}
	return len(p), eof
}

var (
	inflaters  sync.Pool
	srcBuffers sync.Pool
)

// compressedCluster returns the decoded virtual cluster vc (mapped to m), from the cache when possible.
func (r *Reader) compressedCluster(vc int64, m mapping) ([]byte, error) {
	r.mu.Lock()
	c, ok := r.clusters.get(m.host)
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	c = make([]byte, r.cs)
	if _, err := r.readCompressedRun(c, vc, m); err != nil { // a run of one: c holds one cluster
		return nil, err
	}
	r.mu.Lock()
	r.clusters.put(m.host, c)
	r.mu.Unlock()
	return c, nil
}

const maxCompressedRun = 4 << 20 // bytes of compressed data read with one call

// readCompressedRun decodes whole compressed clusters into p, starting with virtual cluster vc
// (mapped to m) and going on while the next clusters are compressed and stored after it, so that
// their compressed bytes come in one read. It returns the bytes of p it filled.
func (r *Reader) readCompressedRun(p []byte, vc int64, m mapping) (int, error) {
	run := []mapping{m}
	end := m.host + m.csize
	for int64(len(run)+1)*r.cs <= int64(len(p)) {
		next, err := r.lookup(vc + int64(len(run)))
		if err != nil || next.kind != kindCompressed || next.host < run[len(run)-1].host ||
			next.host+next.csize-m.host > maxCompressedRun {
			break
		}
		run = append(run, next)
		end = max(end, next.host+next.csize)
	}
	end = min(end, r.fileSize)
	bp, _ := srcBuffers.Get().(*[]byte)
	if bp == nil || int64(cap(*bp)) < end-m.host {
		b := make([]byte, end-m.host)
		bp = &b
	}
	defer srcBuffers.Put(bp)
	src := (*bp)[:end-m.host]
	if _, err := r.r.ReadAt(src, m.host); err != nil && err != io.EOF {
		return 0, fmt.Errorf("qcow2: reading compressed clusters at %#x: %w", m.host, err)
	}
	for i, c := range run {
		in := src[c.host-m.host : min(c.host+c.csize, end)-m.host]
		if err := r.inflateFrom(in, c.host, p[int64(i)*r.cs:int64(i+1)*r.cs]); err != nil {
			return 0, err
		}
	}
	return len(run) * int(r.cs), nil
}

// inflateFrom decodes the compressed bytes src of the cluster stored at host into out.
func (r *Reader) inflateFrom(src []byte, host int64, out []byte) error {
	f, _ := inflaters.Get().(*inflater)
	if f == nil {
		f = new(inflater)
	}
	defer inflaters.Put(f)
	if err := f.inflateCluster(out, src); err != nil {
		return corrupt("compressed cluster at %#x does not decode to a full cluster: %v", host, err)
	}
	return nil
}

// Extents calls fn with each virtual range that holds data (allocated or compressed clusters),
// in increasing order and coalesced; everything else reads as zeros.
func (r *Reader) Extents(ctx context.Context, fn func(off, n int64) error) error {
	perL2 := r.cs / 8
	var start, end int64 = -1, -1
	flush := func() error {
		if start < 0 {
			return nil
		}
		s, e := start, min(end, r.Size())
		start, end = -1, -1
		if e <= s {
			return nil
		}
		return fn(s, e-s)
	}
	for l1i, e := range r.l1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		l2off := int64(e & offsetMask)
		if l2off == 0 {
			continue
		}
		r.mu.Lock()
		t, err := r.l2Table(l2off)
		r.mu.Unlock()
		if err != nil {
			return err
		}
		for i, le := range t {
			if !r.holdsData(le) {
				continue
			}
			off := (int64(l1i)*perL2 + int64(i)) << r.bits
			if off >= r.Size() {
				break
			}
			if off != end {
				if err := flush(); err != nil {
					return err
				}
				start = off
			}
			end = off + r.cs
		}
	}
	return flush()
}

// holdsData reports whether a validated L2 entry maps data (allocated or compressed), as decodeL2
// would classify it but without its refcount check: that reads the refcount-block cache, which
// needs r.mu, and Extents runs while other goroutines read (go test -race found it).
func (r *Reader) holdsData(e uint64) bool {
	switch {
	case e&flagCompress != 0:
		return true
	case r.h.Version >= 3 && e&flagZero != 0:
		return false
	}
	return e&offsetMask != 0
}

// lru is a tiny least-recently-used cache keyed by file offset; callers hold the Reader's lock.
type lru[V any] struct {
	cap  int
	keys []int64
	vals map[int64]V
}

func newLRU[V any](n int) *lru[V] { return &lru[V]{cap: n, vals: map[int64]V{}} }

func (c *lru[V]) get(k int64) (V, bool) {
	v, ok := c.vals[k]
	if ok && c.keys[len(c.keys)-1] != k {
		i := slices.Index(c.keys, k)
		c.keys = append(slices.Delete(c.keys, i, i+1), k)
	}
	return v, ok
}

func (c *lru[V]) put(k int64, v V) {
	if _, ok := c.vals[k]; ok {
		return
	}
	if len(c.keys) == c.cap {
		delete(c.vals, c.keys[0])
		c.keys = slices.Delete(c.keys, 0, 1)
	}
	c.keys = append(c.keys, k)
	c.vals[k] = v
}

// WriteAt refuses: a qcow2 image is read only (write a new image instead).
func (r *Reader) WriteAt([]byte, int64) (int, error) { return 0, vdisk.ErrReadOnly }
