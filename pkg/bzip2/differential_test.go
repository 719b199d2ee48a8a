package bzip2

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"testing"

	dsbzip2 "github.com/dsnet/compress/bzip2"
)

var (
	dsMu    sync.Mutex
	dsCache = map[[sha256.Size + 1]byte][]byte{}
)

// dsCompress makes a bzip2 stream in Go (github.com/dsnet/compress), level 1-9: blocks of
// level*100k, so multi-block inputs need no external tool. Memoized: it is slow (~1 MB/s, far
// slower under -race) and several tests share inputs.
func dsCompress(t testing.TB, data []byte, level int) []byte {
	t.Helper()
	var key [sha256.Size + 1]byte
	sum := sha256.Sum256(data)
	copy(key[:], sum[:])
	key[sha256.Size] = byte(level)
	dsMu.Lock()
	defer dsMu.Unlock()
	if b, ok := dsCache[key]; ok {
		return b
	}
	var b bytes.Buffer
	zw, err := dsbzip2.NewWriter(&b, &dsbzip2.WriterConfig{Level: level})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	dsCache[key] = b.Bytes()
	return b.Bytes()
}

// outputLimit caps what each decoder may produce per input (a few bytes of bzip2 can expand
// to ~46 MB per block); inputs that reach it are not compared.
const outputLimit = 64 << 20

type decoded struct {
	name string
	out  []byte
	err  error
	big  bool
}

func readLimited(name string, r io.Reader) decoded {
	out, err := io.ReadAll(io.LimitReader(r, outputLimit+1))
	return decoded{name: name, out: out, err: err, big: len(out) > outputLimit}
}

// decodeAll runs the same input through ours, the standard library's and dsnet's decoder.
func decodeAll(in []byte) []decoded {
	ours := NewReaderWorkers(bytes.NewReader(in), 2)
	defer ours.Close()
	res := []decoded{readLimited("pkg/bzip2", ours), readLimited("compress/bzip2", stdbzip2.NewReader(bytes.NewReader(in)))}
	if zr, err := dsbzip2.NewReader(bytes.NewReader(in), nil); err != nil {
		res = append(res, decoded{name: "dsnet", err: err})
	} else {
		res = append(res, readLimited("dsnet", zr))
	}
	return res
}

// agree fails t unless the three decoders agree on in: all fail, or all succeed with the same
// output. Ours must fail with ErrCorrupt or ErrTruncated, never another error.
func agree(t *testing.T, in []byte) {
	t.Helper()
	res := decodeAll(in)
	for _, r := range res {
		if r.big {
			return // a decompression bomb: no decoder finished it
		}
	}
	ours := res[0]
	if ours.err != nil && !errors.Is(ours.err, ErrCorrupt) && !errors.Is(ours.err, ErrTruncated) {
		t.Fatalf("pkg/bzip2: error %v wraps neither ErrCorrupt nor ErrTruncated", ours.err)
	}
	for _, r := range res[1:] {
		if (ours.err == nil) != (r.err == nil) {
			t.Fatalf("on %d input bytes: pkg/bzip2 says %d bytes, err %v; %s says %d bytes, err %v", len(in), len(ours.out), ours.err, r.name, len(r.out), r.err)
		}
		if ours.err == nil && !bytes.Equal(ours.out, r.out) {
			t.Fatalf("on %d input bytes: pkg/bzip2 and %s decode to different data (%d vs %d bytes)", len(in), r.name, len(ours.out), len(r.out))
		}
	}
}

// diffSeeds are valid streams (one and several blocks, several streams, an empty one) and
// damaged ones, all made in Go and small, so mutations run fast (TestLbzip2Fixture runs agree
// on lbzip2's own output).
func diffSeeds(t testing.TB) [][]byte {
	text := []byte("flatcar container linux openstack cluster-api ignition grub qcow2\n")
	many := bytes.Repeat(text, 4000) // 264 kB: three blocks at level 1
	seeds := [][]byte{nil, []byte("BZh9"), []byte("hello"), dsCompress(t, nil, 9), dsCompress(t, []byte("aaaaaaaaaaaaaaaaaaaa"), 9),
		dsCompress(t, text, 1), dsCompress(t, many, 1)}
	two := append(dsCompress(t, text, 9), dsCompress(t, []byte("x"), 1)...)
	seeds = append(seeds, two, append(append([]byte{}, two...), 0))
	cut := dsCompress(t, many, 1)
	seeds = append(seeds, cut[:len(cut)/2])
	flip := append([]byte{}, cut...)
	flip[len(flip)/3] ^= 0x04
	return append(seeds, flip)
}

// FuzzDecodersAgree is the differential fuzz target: on any input pkg/bzip2, compress/bzip2
// and github.com/dsnet/compress/bzip2 all fail or all return the same bytes. Plain go test
// checks the seeds; scripts/fuzz.sh fuzzes it in make test.
func FuzzDecodersAgree(f *testing.F) {
	for _, s := range diffSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) { agree(t, in) })
}
