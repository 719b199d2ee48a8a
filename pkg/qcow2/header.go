// Package qcow2 reads and writes qcow2 images (versions 2 and 3, the "compat 0.10" and "1.1" of
// qemu-img) in pure Go: a random-access reader over the virtual disk, a sparse-aware writer with
// optional parallel deflate, a streaming writer whose length is known up front, and a sparse copy
// to raw.
//
// Compressed clusters are decoded by our own inflater (inflate.go), not by
// github.com/klauspost/compress/flate, for a whole-command reason (docs/architecture.md,
// "Hand-written codecs"): `flatcar-capo convert` of a 449 MB compressed qcow2 to raw took 21.4 s
// wall and 4.6 s CPU with it against 40.3 s and 7.8 s with klauspost's flate in the same run
// (2026-12-02, load ~23; scripts/bench/codecs.sh inflater): 1.7x less CPU. The same decode was
// 45% of `build --method sysext`'s CPU from a published image (docs/bench.md). Re-measure when
// either changes.
package qcow2

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// magic is the first four bytes of every qcow2 file.
var magic = [4]byte{'Q', 'F', 'I', 0xfb}

// errUnsupported is wrapped by errors about valid qcow2 features this package does not implement.
var errUnsupported = errors.New("not supported")

// errCorrupt is wrapped by errors about images that break the qcow2 format.
var errCorrupt = errors.New("corrupt qcow2 image")

func unsupported(format string, a ...any) error {
	return fmt.Errorf("qcow2: %s: %w (convert it with qemu-img first)", fmt.Sprintf(format, a...), errUnsupported)
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errCorrupt, fmt.Sprintf(format, a...))
}

const (
	headerV2Len = 72
	headerV3Len = 104

	minClusterBits     = 9
	maxClusterBits     = 21
	defaultClusterBits = 16

	maxL1Bytes       = 32 << 20 // qemu's QCOW_MAX_L1_SIZE
	maxRefTableBytes = 8 << 20  // qemu's QCOW_MAX_REFTABLE_SIZE
	maxVirtualSize   = 1 << 56  // beyond what qemu creates; keeps offset arithmetic far from overflow

	// Incompatible feature bits (version 3).
	incompatDirty        = 1 << 0
	incompatCorrupt      = 1 << 1
	incompatExternalData = 1 << 2
	incompatCompressType = 1 << 3
	incompatExtendedL2   = 1 << 4

	extEnd          = 0x00000000
	extExternalData = 0x44415441
	extCrypto       = 0x0537be77
)

// Header is the fixed part of a qcow2 header.
type Header struct {
	Version               uint32
	BackingFileOffset     uint64
	BackingFileSize       uint32
	ClusterBits           uint32
	Size                  uint64 // virtual disk size in bytes
	CryptMethod           uint32
	L1Size                uint32 // entries
	L1TableOffset         uint64
	RefcountTableOffset   uint64
	RefcountTableClusters uint32
	NbSnapshots           uint32
	SnapshotsOffset       uint64
	Incompatible          uint64
	Compatible            uint64
	Autoclear             uint64
	RefcountOrder         uint32
	HeaderLength          uint32
	CompressionType       uint8
}

func (h *Header) clusterSize() int64 { return 1 << h.ClusterBits }

// parseHeader decodes and validates the header from the first cluster (or less, for a short
// file) of an image of fileSize bytes.
func parseHeader(b []byte, fileSize int64) (*Header, error) {
	if len(b) < 4 || [4]byte(b[:4]) != magic {
		return nil, corrupt("no qcow2 magic")
	}
	if len(b) < headerV2Len {
		return nil, corrupt("truncated header (%d bytes)", len(b))
	}
	be := binary.BigEndian
	h := &Header{
		Version:               be.Uint32(b[4:]),
		BackingFileOffset:     be.Uint64(b[8:]),
		BackingFileSize:       be.Uint32(b[16:]),
		ClusterBits:           be.Uint32(b[20:]),
		Size:                  be.Uint64(b[24:]),
		CryptMethod:           be.Uint32(b[32:]),
		L1Size:                be.Uint32(b[36:]),
		L1TableOffset:         be.Uint64(b[40:]),
		RefcountTableOffset:   be.Uint64(b[48:]),
		RefcountTableClusters: be.Uint32(b[56:]),
		NbSnapshots:           be.Uint32(b[60:]),
		SnapshotsOffset:       be.Uint64(b[64:]),
		RefcountOrder:         4,
		HeaderLength:          headerV2Len,
	}
	switch h.Version {
	case 2:
	case 3:
		if len(b) < headerV3Len {
			return nil, corrupt("truncated version 3 header (%d bytes)", len(b))
		}
		h.Incompatible = be.Uint64(b[72:])
		h.Compatible = be.Uint64(b[80:])
		h.Autoclear = be.Uint64(b[88:])
		h.RefcountOrder = be.Uint32(b[96:])
		h.HeaderLength = be.Uint32(b[100:])
	default:
		return nil, unsupported("qcow2 version %d", h.Version)
	}
	if h.ClusterBits < minClusterBits || h.ClusterBits > maxClusterBits {
		return nil, corrupt("cluster_bits %d out of range %d..%d", h.ClusterBits, minClusterBits, maxClusterBits)
	}
	cs := h.clusterSize()
	if len(b) > int(cs) {
		b = b[:cs]
	}
	if h.Version == 3 {
		if h.HeaderLength < headerV3Len || int64(h.HeaderLength) > cs {
			return nil, corrupt("header_length %d out of range", h.HeaderLength)
		}
		if int(h.HeaderLength) > len(b) {
			return nil, corrupt("truncated header (%d of %d bytes)", len(b), h.HeaderLength)
		}
		if h.HeaderLength > headerV3Len {
			h.CompressionType = b[headerV3Len]
		}
		if h.RefcountOrder > 6 {
			return nil, corrupt("refcount_order %d out of range 0..6", h.RefcountOrder)
		}
	}
	if err := h.checkFeatures(b); err != nil {
		return nil, err
	}
	return h, h.checkTables(fileSize)
}

// checkFeatures refuses, by name, every feature that would make our reads wrong.
func (h *Header) checkFeatures(b []byte) error {
	if h.CryptMethod != 0 {
		name := cmp.Or(map[uint32]string{1: "AES", 2: "LUKS"}[h.CryptMethod], fmt.Sprintf("method %d", h.CryptMethod))
		return unsupported("encrypted images (%s encryption)", name)
	}
	if h.BackingFileOffset != 0 {
		name := ""
		end := h.BackingFileOffset + uint64(h.BackingFileSize)
		if h.BackingFileSize <= 1023 && h.BackingFileOffset <= uint64(len(b)) && end <= uint64(len(b)) {
			name = fmt.Sprintf(" %q", b[h.BackingFileOffset:end])
		}
		return unsupported("backing files (this image is an overlay on backing file%s)", name)
	}
	inc := h.Incompatible
	if inc&incompatCorrupt != 0 {
		return corrupt("the image is marked corrupt by qemu; repair it with 'qemu-img check -r all'")
	}
	if inc&incompatExternalData != 0 {
		return unsupported("external data files")
	}
	if inc&incompatExtendedL2 != 0 {
		return unsupported("extended L2 entries (subclusters)")
	}
	switch {
	case inc&incompatCompressType != 0 && h.CompressionType == 1:
		return unsupported("zstd compression")
	case h.CompressionType == 1:
		return corrupt("zstd compression type without its incompatible feature bit")
	case h.CompressionType != 0:
		return unsupported("compression type %d", h.CompressionType)
	}
	if rest := inc &^ (incompatDirty | incompatCompressType); rest != 0 {
		return unsupported("unknown incompatible feature bit %d", bits.TrailingZeros64(rest))
	}
	if h.Version == 3 {
		return h.checkExtensions(b)
	}
	return nil
}

// checkExtensions walks the header extensions; those that matter are already flagged by feature
// bits, but a crypto or external-data extension without its bit is still refused.
func (h *Header) checkExtensions(b []byte) error {
	off := int(h.HeaderLength)
	for off+8 <= len(b) {
		typ := binary.BigEndian.Uint32(b[off:])
		n := int(binary.BigEndian.Uint32(b[off+4:]))
		switch typ {
		case extEnd:
			return nil
		case extCrypto:
			return unsupported("encrypted images (crypto header extension)")
		case extExternalData:
			return unsupported("external data files")
		}
		if n < 0 || n > len(b) {
			return corrupt("header extension 0x%08x has length %d past the first cluster", typ, n)
		}
		off += 8 + (n+7)&^7
	}
	return nil
}

// checkTables makes sure the L1 and refcount tables fit the file, so that loading them can never
// allocate more than the file holds.
func (h *Header) checkTables(fileSize int64) error {
	cs := h.clusterSize()
	if h.Size > maxVirtualSize {
		// qemu-img makes such files (1 EiB with 2 MiB clusters); they are not damaged.
		return fmt.Errorf("qcow2: a virtual size of %d bytes (%d PiB) is too large, %w (at most %d PiB; a Flatcar image is a few GiB)",
			h.Size, h.Size>>50, errUnsupported, uint64(maxVirtualSize)>>50)
	}
	perL1 := uint64(cs) * uint64(cs/8)
	need := (h.Size + perL1 - 1) / perL1
	if uint64(h.L1Size) < need {
		return corrupt("L1 table has %d entries, the virtual size needs %d", h.L1Size, need)
	}
	if uint64(h.L1Size)*8 > maxL1Bytes {
		return corrupt("L1 table of %d entries is larger than qemu allows", h.L1Size)
	}
	if h.L1Size > 0 {
		if err := h.checkRange("L1 table", h.L1TableOffset, uint64(h.L1Size)*8, fileSize); err != nil {
			return err
		}
	}
	if h.RefcountTableClusters == 0 || uint64(h.RefcountTableClusters)*uint64(cs) > maxRefTableBytes {
		return corrupt("refcount table of %d clusters out of range", h.RefcountTableClusters)
	}
	return h.checkRange("refcount table", h.RefcountTableOffset, uint64(h.RefcountTableClusters)*uint64(cs), fileSize)
}

func (h *Header) checkRange(what string, off, n uint64, fileSize int64) error {
	cs := uint64(h.clusterSize())
	switch {
	case off%cs != 0:
		return corrupt("%s offset %#x is not cluster aligned", what, off)
	case off == 0:
		return corrupt("%s overlaps the header", what)
	case off > uint64(fileSize) || n > uint64(fileSize)-off:
		return corrupt("%s at %#x (+%d bytes) points past the end of the file (%d bytes); the file is truncated", what, off, n, fileSize)
	}
	return nil
}

// marshal encodes a header written by this package (no backing file, no encryption, no features)
// followed by the end-of-extensions marker.
func (h *Header) marshal() []byte {
	n := headerV2Len
	if h.Version == 3 {
		n = headerV3Len
	}
	b := make([]byte, n+8)
	be := binary.BigEndian
	copy(b, magic[:])
	be.PutUint32(b[4:], h.Version)
	be.PutUint32(b[20:], h.ClusterBits)
	be.PutUint64(b[24:], h.Size)
	be.PutUint32(b[36:], h.L1Size)
	be.PutUint64(b[40:], h.L1TableOffset)
	be.PutUint64(b[48:], h.RefcountTableOffset)
	be.PutUint32(b[56:], h.RefcountTableClusters)
	if h.Version == 3 {
		be.PutUint32(b[96:], 4)
		be.PutUint32(b[100:], headerV3Len)
	}
	return b
}
