package qcow2

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Images this package writes put every table in front of the data, in this order:
// header cluster, L1 table, refcount table, refcount blocks, L2 tables, data clusters.
// The tables are sized from the source's hole map before any data is read, so the data can be
// written (or streamed) in one sequential pass.

// run is a range of virtual clusters that may hold data.
type run struct{ vc, n int64 }

// scanRuns turns the source's extents into cluster runs.
func scanRuns(ctx context.Context, src vdisk.Disk, bits uint) (runs []run, clusters int64, err error) {
	err = src.Extents(ctx, func(off, n int64) error {
		first, last := off>>bits, (off+n-1)>>bits
		if k := len(runs) - 1; k >= 0 && runs[k].vc+runs[k].n > first {
			first = runs[k].vc + runs[k].n // the cluster is already counted
		}
		if last < first {
			return nil
		}
		if k := len(runs) - 1; k >= 0 && runs[k].vc+runs[k].n == first {
			runs[k].n += last - first + 1
		} else {
			runs = append(runs, run{first, last - first + 1})
		}
		clusters += last - first + 1
		return nil
	})
	return runs, clusters, err
}

type layout struct {
	h          Header
	bits       uint
	cs         int64
	l1Off      int64
	rtOff      int64
	rtClusters int64
	rbOff      int64
	rbCount    int64
	l2Host     map[int64]int64 // L1 index -> offset reserved for its L2 table
	dataOff    int64

	l2   map[int64][]uint64 // L1 index -> entries, for tables that got an entry
	refs []byte             // the refcount blocks: 16-bit big-endian refcounts of every host cluster
}

// planLayout reserves the tables for a virtual disk of size bytes whose data lies in runs and
// may take up to maxData host clusters.
func planLayout(size int64, bits uint, version uint32, runs []run, maxData int64) *layout {
	cs := int64(1) << bits
	size = (size + sectorSize - 1) &^ (sectorSize - 1)
	perL1 := cs * (cs / 8)
	l1Len := (size + perL1 - 1) / perL1
	l := &layout{bits: bits, cs: cs, l2Host: map[int64]int64{}, l2: map[int64][]uint64{}}
	var l1Used []int64
	for _, r := range runs {
		for i := r.vc >> (bits - 3); i <= (r.vc+r.n-1)>>(bits-3); i++ {
			if len(l1Used) == 0 || l1Used[len(l1Used)-1] != i {
				l1Used = append(l1Used, i)
			}
		}
	}
	l1Clusters := max(1, ceilDiv(l1Len*8, cs))
	var rb, rt int64 = 1, 1
	for {
		meta := 1 + l1Clusters + rt + rb + int64(len(l1Used))
		nrb := ceilDiv(meta+maxData+1, cs/2)
		nrt := ceilDiv(nrb*8, cs)
		if nrb == rb && nrt == rt {
			break
		}
		rb, rt = max(rb, nrb), max(rt, nrt)
	}
	l.l1Off = cs
	l.rtOff = l.l1Off + l1Clusters*cs
	l.rtClusters = rt
	l.rbOff = l.rtOff + rt*cs
	l.rbCount = rb
	next := l.rbOff + rb*cs
	for _, i := range l1Used {
		l.l2Host[i] = next
		next += cs
	}
	l.dataOff = next
	l.refs = make([]byte, rb*cs)
	l.h = Header{Version: version, ClusterBits: uint32(bits), Size: uint64(size), L1Size: uint32(l1Len),
		L1TableOffset: uint64(l.l1Off), RefcountTableOffset: uint64(l.rtOff), RefcountTableClusters: uint32(rt)}
	return l
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// setL2 records where virtual cluster vc is stored.
func (l *layout) setL2(vc int64, entry uint64) {
	i := vc >> (l.bits - 3)
	t := l.l2[i]
	if t == nil {
		t = make([]uint64, l.cs/8)
		l.l2[i] = t
	}
	t[vc&(l.cs/8-1)] = entry
}

// incRef counts one more use of host clusters [first, last].
func (l *layout) incRef(first, last int64) error {
	for c := first; c <= last; c++ {
		if 2*c+2 > int64(len(l.refs)) {
			return fmt.Errorf("qcow2: internal error: host cluster %d beyond the planned refcount blocks", c)
		}
		v := binary.BigEndian.Uint16(l.refs[2*c:])
		binary.BigEndian.PutUint16(l.refs[2*c:], v+1)
	}
	return nil
}

// metadata returns the bytes of [0, dataOff): header, L1, refcount table and blocks, L2 tables.
// Reserved L2 tables that got no entry stay zero and unreferenced. Call it once, after the data.
func (l *layout) metadata() ([]byte, error) {
	b := make([]byte, l.dataOff)
	copy(b, l.h.marshal())
	for c := int64(0); c < l.rbOff/l.cs+l.rbCount; c++ { // header, L1, refcount table and blocks
		if err := l.incRef(c, c); err != nil {
			return nil, err
		}
	}
	for i, t := range l.l2 {
		host := l.l2Host[i]
		binary.BigEndian.PutUint64(b[l.l1Off+8*i:], uint64(host)|flagCopied)
		for j, e := range t {
			binary.BigEndian.PutUint64(b[host+8*int64(j):], e)
		}
		if err := l.incRef(host/l.cs, host/l.cs); err != nil {
			return nil, err
		}
	}
	for i := int64(0); i < l.rbCount; i++ {
		binary.BigEndian.PutUint64(b[l.rtOff+8*i:], uint64(l.rbOff+i*l.cs))
	}
	copy(b[l.rbOff:], l.refs)
	return b, nil
}
