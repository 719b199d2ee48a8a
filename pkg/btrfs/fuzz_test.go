package btrfs

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"io"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

const (
	fuzzDevSize = 128 << 20
	fuzzBlock   = 4096
	fuzzMaxRecs = 64
)

// sparseDev is a device of fuzzDevSize bytes holding a few 4 KiB blocks; the rest reads as
// zeros. It lets a fuzz input describe a whole filesystem in a few dozen KiB.
type sparseDev map[int64][]byte

func (d sparseDev) ReadAt(p []byte, off int64) (int, error) {
	return d.each(p, off, false, func(blk []byte, in int, part []byte) {
		if blk == nil {
			clear(part)
		} else {
			copy(part, blk[in:])
		}
	})
}

func (d sparseDev) WriteAt(p []byte, off int64) (int, error) {
	return d.each(p, off, false, func(blk []byte, in int, part []byte) { copy(blk[in:], part) })
}

// each splits [off, off+len(p)) into block parts; writes create missing blocks.
func (d sparseDev) each(p []byte, off int64, create bool, fn func(blk []byte, in int, part []byte)) (int, error) {
	if off < 0 || off >= fuzzDevSize {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), fuzzDevSize-off))
	for done := 0; done < n; {
		base := (off + int64(done)) &^ (fuzzBlock - 1)
		in := int(off + int64(done) - base)
		part := p[done:min(n, done+fuzzBlock-in)]
		blk := d[base]
		if blk == nil && create {
			blk = make([]byte, fuzzBlock)
			d[base] = blk
		}
		fn(blk, in, part)
		done += len(part)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fuzzBase is a real mkfs.btrfs image (mixed, single) reduced to the blocks Open and ReadFile
// touch: records of (8-byte offset, 4 KiB block). It is committed so that a saved failing
// input reproduces.
var fuzzBase = testutil.Testdata("btrfs", "fuzz-base.bin.gz")

var updateFuzzBase = flag.Bool("update-fuzz-base", false, "rebuild "+fuzzBase+" with mkfs.btrfs")

func loadFuzzBase(t testing.TB) []byte {
	f, err := os.Open(fuzzBase)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeFuzzDev applies a fuzz input to the base records and builds the device. The input is a
// flags byte then 4-byte patches (24-bit position in the records, new byte value); with flag
// bit 0 every block gets a correct checksum afterwards, so mutations reach past verification.
func decodeFuzzDev(base, data []byte) sparseDev {
	recs := append([]byte(nil), base...)
	var flags byte
	if len(data) > 0 {
		flags, data = data[0], data[1:]
	}
	for ; len(data) >= 4; data = data[4:] {
		pos := int(data[0]) | int(data[1])<<8 | int(data[2])<<16
		recs[pos%len(recs)] = data[3]
	}
	d := sparseDev{}
	for ; len(recs) >= 8+fuzzBlock; recs = recs[8+fuzzBlock:] {
		off := int64(binary.LittleEndian.Uint64(recs)%fuzzDevSize) &^ (fuzzBlock - 1)
		blk := recs[8 : 8+fuzzBlock]
		if flags&1 != 0 {
			setCsum(blk)
		}
		d[off] = blk
	}
	return d
}

// tracer records which blocks of a device are read.
type tracer struct {
	io.ReaderAt
	blocks map[int64]bool
}

func (t *tracer) ReadAt(p []byte, off int64) (int, error) {
	for b := off &^ (fuzzBlock - 1); b < off+int64(len(p)); b += fuzzBlock {
		t.blocks[b] = true
	}
	return t.ReaderAt.ReadAt(p, off)
}

// encodeFuzzBase keeps the blocks of a real image that opening and reading it touch.
func encodeFuzzBase(t testing.TB, img []byte) []byte {
	tr := &tracer{bytes.NewReader(img), map[int64]bool{}}
	fs, err := Open(tr, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	readTree(fs, "/", 3)
	offs := slices.Sorted(maps.Keys(tr.blocks))
	var out []byte
	for _, off := range offs {
		out = binary.LittleEndian.AppendUint64(out, uint64(off))
		out = append(out, img[off:off+fuzzBlock]...)
	}
	return out
}

// TestFuzzBase reads the committed fuzz base (and rebuilds it with -update-fuzz-base).
func TestFuzzBase(t *testing.T) {
	want := qemuOEM(true)
	if *updateFuzzBase {
		img := readImage(t, mkImage(t, variant{"fuzz", mixedSingle.mkfsArgs, true, fuzzDevSize}, want))
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(encodeFuzzBase(t, img))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fuzzBase, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := Open(decodeFuzzDev(loadFuzzBase(t), nil), fuzzDevSize)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "fuzz base", readAllFS(t, fs, want), want)
}

func FuzzOpen(f *testing.F) {
	base := loadFuzzBase(f)
	f.Add([]byte{0})
	f.Add([]byte{1, 0x00, 0x00, 0x01, 0xff}) // a byte of the superblock record's offset
	f.Fuzz(func(t *testing.T, data []byte) {
		dev := decodeFuzzDev(base, data)
		fs, err := Open(dev, fuzzDevSize)
		if err != nil {
			return
		}
		fs.Label()
		readTree(fs, "/", 3)
		fs.write(dev, "/grub.cfg", []byte("set oem_id=\"openstack\"\n"))
		fs.write(dev, "/sysext/new", []byte("x"))
		if fs, err := Open(dev, fuzzDevSize); err == nil {
			readTree(fs, "/", 3)
		}
	})
}

// readTree reads every small file under dir, depth levels deep.
func readTree(fs *FS, dir string, depth int) {
	es, err := fs.list(dir)
	if err != nil || depth == 0 {
		return
	}
	for _, e := range es {
		p := dir + "/" + e.Name
		st, err := fs.entry(p)
		switch {
		case err != nil:
		case st.IsDir:
			readTree(fs, p, depth-1)
		case st.Size <= 1<<20:
			fs.read(p)
		}
	}
}

// FuzzLeaf patches one tree block of the base (3-byte patches: 16-bit position, value), fixes
// its checksum and feeds it to the block parser and item decoders; any leaf that parses must
// survive a decode/encode round trip unchanged.
func FuzzLeaf(f *testing.F) {
	base := loadFuzzBase(f)
	var blocks [][]byte
	var logicals []uint64
	fs, err := Open(decodeFuzzDev(base, nil), fuzzDevSize)
	if err != nil {
		f.Fatal(err)
	}
	for recs := base; len(recs) >= 8+fuzzBlock; recs = recs[8+fuzzBlock:] {
		if blk := recs[8 : 8+fuzzBlock]; bytes.Equal(blk[0x20:0x30], fs.sb.metadataUUID[:]) {
			blocks, logicals = append(blocks, blk), append(logicals, le.Uint64(blk[0x30:]))
		}
	}
	for i := range blocks {
		f.Add(uint8(i), []byte{0x60, 0x00, 0xff}) // nritems
	}
	f.Fuzz(func(t *testing.T, which uint8, patches []byte) {
		i := int(which) % len(blocks)
		buf := append([]byte(nil), blocks[i]...)
		for ; len(patches) >= 3; patches = patches[3:] {
			buf[int(le.Uint16(patches))%len(buf)] = patches[2]
		}
		setCsum(buf)
		b, err := fs.parseBlock(logicals[i], buf)
		if err != nil || b.level != 0 {
			return
		}
		for i := range b.keys {
			parseDirItems(b.data(i))
			parseFileExtent(b.data(i))
			parseChunk(b.keys[i].offset, b.data(i))
		}
		out, err := newLeafEdit(b).encode()
		if err != nil {
			t.Fatalf("re-encoding a valid leaf: %v", err)
		}
		b2, err := fs.parseBlock(b.logical, out)
		if err != nil {
			t.Fatalf("re-encoded leaf does not parse: %v", err)
		}
		for i := range b.keys {
			if b.keys[i] != b2.keys[i] || !bytes.Equal(b.data(i), b2.data(i)) {
				t.Fatalf("item %d changed in the round trip", i)
			}
		}
	})
}
