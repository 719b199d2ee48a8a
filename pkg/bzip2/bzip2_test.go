package bzip2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os/exec"
	"testing"
	"testing/iotest"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// compress runs a real compressor (bzip2, lbzip2) over data.
func compress(t testing.TB, data []byte, tool ...string) []byte {
	t.Helper()
	testutil.RequireTools(t, tool[0])
	cmd := exec.Command(tool[0], tool[1:]...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v: %s", tool, err, stderr.Bytes())
	}
	return out
}

// decompress reads all of in through our reader with the given workers.
func decompress(in []byte, workers int) ([]byte, error) {
	zr := NewReaderWorkers(bytes.NewReader(in), workers)
	defer zr.Close()
	return io.ReadAll(zr)
}

// sized is full, or small under testutil.Small (the race run of make test: the race detector
// makes decoding ~10x slower, and a few blocks through the workers find races as well as many;
// the fast tier).
func sized(full, small int) int {
	if testutil.Small() {
		return small
	}
	return full
}

func randomData(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func textData(rng *rand.Rand, n int) []byte {
	words := []string{"flatcar", "container", "linux", "openstack", "image", "the", "a", "of",
		"kernel", "grub", "ignition", "\n", "cluster-api", "0123456789", "  ", "qcow2"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.Intn(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// mixedData looks like a disk image: runs of zeros, text, random bytes and
// short repeats (which exercise bzip2's first run-length stage).
func mixedData(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		size := 1 + rng.Intn(300000)
		switch rng.Intn(5) {
		case 0:
			b.Write(make([]byte, size))
		case 1:
			b.Write(textData(rng, size))
		case 2:
			b.Write(randomData(rng, size))
		case 3:
			b.Write(bytes.Repeat([]byte{byte(rng.Intn(256))}, size))
		default:
			for i := 0; i < size; i++ {
				b.WriteByte(byte(rng.Intn(3)))
			}
		}
	}
	return b.Bytes()[:n]
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	inputs := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{'x'}},
		{"four equal bytes", []byte("aaaa")},
		{"run of 300", bytes.Repeat([]byte{7}, 300)},
		{"random 100k", randomData(rng, 100000)},
		{"text 1M", textData(rng, 1<<20)},
		{"zeros 5M", make([]byte, 5<<20)},
		{"mixed 3M", mixedData(rng, 3<<20)},
		{"random 2.5M", randomData(rng, 5<<19)},
	}
	tools := [][]string{{"bzip2", "-9"}, {"bzip2", "-1"}, {"lbzip2", "-9", "-n2"}, {"lbzip2", "-1", "-n2"}}
	if testing.Short() { // the real tools' output, small: one input of many 100k blocks
		inputs = append(inputs[:5:5], struct {
			name string
			data []byte
		}{"mixed 1M", mixedData(rng, 1<<20)})
		tools = [][]string{{"bzip2", "-1"}, {"lbzip2", "-1", "-n2"}}
	}
	for _, in := range inputs {
		for _, tool := range tools {
			t.Run(fmt.Sprintf("%s/%s%s", in.name, tool[0], tool[1]), func(t *testing.T) {
				comp := compress(t, in.data, tool...)
				for _, workers := range []int{1, 3} {
					got, err := decompress(comp, workers)
					if err != nil {
						t.Fatalf("workers=%d: %v", workers, err)
					}
					if !bytes.Equal(got, in.data) {
						t.Fatalf("workers=%d: output differs (%d bytes, want %d)", workers, len(got), len(in.data))
					}
				}
			})
		}
	}
}

// A large lbzip2 file: many 900k blocks through the pipeline, with small reads.
func TestRoundTripLarge(t *testing.T) {
	data := mixedData(rand.New(rand.NewSource(2)), sized(24<<20, 3<<20))
	comp := compress(t, data, "lbzip2", "-9", "-n2")
	zr := NewReader(iotest.HalfReader(bytes.NewReader(comp)))
	defer zr.Close()
	var got bytes.Buffer
	if _, err := io.Copy(&got, zr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("output differs (%d bytes, want %d)", got.Len(), len(data))
	}
}

// pbzip2-style: several complete streams, including an empty one, back to back.
func TestConcatenatedStreams(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	parts := [][]byte{textData(rng, sized(1500000, 300000)), nil, randomData(rng, 1000), mixedData(rng, sized(2000000, 400000))}
	var comp, want []byte
	for i, p := range parts {
		tool := []string{"bzip2", fmt.Sprintf("-%d", 1+i*2)}
		if i%2 == 1 {
			tool = []string{"lbzip2", "-9"}
		}
		comp = append(comp, compress(t, p, tool...)...)
		want = append(want, p...)
	}
	for _, workers := range []int{1, 2, 5} {
		got, err := decompress(comp, workers)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("workers=%d: %d bytes, err %v; want %d bytes", workers, len(got), err, len(want))
		}
	}
}

// fakeMagics adds false block and end-of-stream candidates every step bits
// to the real ones, as if the magic occurred by chance inside block data.
func fakeMagics(step int64) func([]byte, int64, int64, int64, func(candidate)) {
	return func(buf []byte, base, from, to int64, emit func(candidate)) {
		var real []candidate
		scanMagics(buf, base, from, to, func(c candidate) { real = append(real, c) })
		next := (from*8/step + 1) * step
		for next < to*8 || len(real) > 0 {
			if len(real) > 0 && real[0].bit <= next {
				emit(real[0])
				if real[0].bit == next {
					next += step
				}
				real = real[1:]
				continue
			}
			if next >= to*8 || next+48 > (base+int64(len(buf)))*8 {
				next += step
				continue
			}
			emit(candidate{bit: next, eos: next/step%3 == 0})
			next += step
		}
	}
}

func TestFalseMagicCandidates(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	data := append(mixedData(rng, sized(3<<20, 1<<20)), textData(rng, sized(1<<20, 200<<10))...)
	comp := append(dsCompress(t, data, sized(9, 2)), dsCompress(t, data[:5000], 9)...)
	want := append(append([]byte{}, data...), data[:5000]...)
	for _, step := range []int64{99991, 1234567, 8000007} {
		zr := NewReaderWorkers(bytes.NewReader(comp), 2).(*reader)
		zr.scan = fakeMagics(step)
		got, err := io.ReadAll(zr)
		zr.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("step %d: %d bytes, err %v; want %d bytes", step, len(got), err, len(want))
		}
	}
}

func TestScanFindsMagicAtEveryShift(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, magic := range []uint64{blockMagic, eosMagic} {
		for bit := int64(0); bit < 200; bit += 7 {
			buf := make([]byte, 64)
			for i := range buf {
				buf[i] = byte(rng.Intn(256)) &^ 0x11 // keeps chance matches away
			}
			// Clear the 48 bits at bit, then set the magic there.
			for i := int64(0); i < 48; i++ {
				p := bit + i
				buf[p/8] &^= 0x80 >> (p % 8)
				if magic>>(47-i)&1 == 1 {
					buf[p/8] |= 0x80 >> (p % 8)
				}
			}
			var found []candidate
			scanMagics(buf, 1000, 1000, 1064, func(c candidate) { found = append(found, c) })
			want := candidate{bit: 8000 + bit, eos: magic == eosMagic}
			if len(found) != 1 || found[0] != want {
				t.Fatalf("magic %#x at bit %d: found %v", magic, bit, found)
			}
		}
	}
}

// sample is a 3-block file (100k blocks, made in Go) used by the damage tests.
func sample(t *testing.T) (data, comp []byte) {
	data = mixedData(rand.New(rand.NewSource(6)), 250000)
	return data, dsCompress(t, data, 1)
}

func TestTruncatedInput(t *testing.T) {
	data, comp := sample(t)
	_ = data
	step := max(1, len(comp)/sized(300, 40))
	cuts := []int{0, 1, 3, 4, 5, 10, len(comp) - 5, len(comp) - 4, len(comp) - 1}
	for n := 0; n < len(comp); n += step {
		cuts = append(cuts, n)
	}
	for _, n := range cuts {
		got, err := decompress(comp[:n], 2)
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut at %d of %d: got %d bytes, err %v; want ErrTruncated", n, len(comp), len(got), err)
		}
	}
}

func TestCorruptInput(t *testing.T) {
	_, comp := sample(t)
	flip := func(bit int) []byte {
		c := append([]byte{}, comp...)
		c[bit/8] ^= 0x80 >> (bit % 8)
		return c
	}
	cases := map[string][]byte{
		"not bzip2":         []byte("hello world, this is not bzip2"),
		"bad level":         append([]byte("BZh0"), comp[4:]...),
		"level too small":   append([]byte("BZh1"), dsCompress(t, randomData(rand.New(rand.NewSource(7)), sized(300000, 150000)), 9)[4:]...),
		"block crc":         flip(32 + 48 + 5),
		"stream crc":        flip(len(comp)*8 - 9),
		"trailing garbage":  append(append([]byte{}, comp...), "garbage"...),
		"trailing zeros":    append(append([]byte{}, comp...), 0, 0, 0, 0),
		"first block magic": flip(40),
	}
	for name, in := range cases {
		got, err := decompress(in, 2)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %d bytes, err %v; want ErrCorrupt", name, len(got), err)
		}
	}
	// Any flipped bit in the block data is caught (by a decoding error or a CRC).
	rng := rand.New(rand.NewSource(8))
	for i := 0; i < sized(200, 30); i++ {
		bit := 200 + rng.Intn(len(comp)*8-400)
		got, err := decompress(flip(bit), 2)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("flipped bit %d: got %d bytes, err %v; want an error", bit, len(got), err)
		}
	}
}

type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

func TestReadErrorPropagates(t *testing.T) {
	_, comp := sample(t)
	boom := errors.New("network went away")
	zr := NewReader(&failingReader{r: bytes.NewReader(comp), n: len(comp) / 2, err: boom})
	defer zr.Close()
	if _, err := io.ReadAll(zr); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
}

func TestCloseMidStream(t *testing.T) {
	data := mixedData(rand.New(rand.NewSource(9)), sized(8<<20, 1<<20))
	comp := dsCompress(t, data, sized(9, 1))
	zr := NewReaderWorkers(bytes.NewReader(comp), 2)
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(zr, buf); err != nil || !bytes.Equal(buf, data[:1000]) {
		t.Fatalf("first read: %v", err)
	}
	done := make(chan struct{})
	go func() { zr.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	if _, err := zr.Read(buf); err == nil {
		t.Fatal("Read after Close succeeded")
	}
}

func TestBlockCRC(t *testing.T) {
	// Reference: bitwise MSB-first CRC-32 (polynomial 0x04c11db7).
	ref := func(p []byte) uint32 {
		c := ^uint32(0)
		for _, b := range p {
			c ^= uint32(b) << 24
			for i := 0; i < 8; i++ {
				if c&(1<<31) != 0 {
					c = c<<1 ^ 0x04c11db7
				} else {
					c <<= 1
				}
			}
		}
		return ^c
	}
	rng := rand.New(rand.NewSource(10))
	for _, n := range []int{0, 1, 7, 8, 9, 4095, 4096, 4097, 10000} {
		p := randomData(rng, n)
		if got, want := blockCRC(p), ref(p); got != want {
			t.Fatalf("n=%d: %08x, want %08x", n, got, want)
		}
	}
}

// Small and odd-sized reads split runs and blocks at every possible place.
func TestSmallReads(t *testing.T) {
	data := mixedData(rand.New(rand.NewSource(11)), sized(1500000, 400000))
	comp := dsCompress(t, data, 1)
	zr := NewReader(bytes.NewReader(comp))
	defer zr.Close()
	var got []byte
	buf := make([]byte, 300)
	for i := 0; ; i++ {
		n, err := zr.Read(buf[:1+i%257])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("output differs (%d bytes, want %d)", len(got), len(data))
	}
}

// BenchmarkNewReader decodes an lbzip2 file of mostly incompressible data,
// like a release's compressed qcow2 (scripts/bench/bzip2.sh compares
// against bzip2 and lbzip2 on a real-sized file).
func BenchmarkNewReader(b *testing.B) {
	rng := rand.New(rand.NewSource(12))
	data := append(randomData(rng, 12<<20), mixedData(rng, 4<<20)...)
	comp := compress(b, data, "lbzip2", "-9")
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		zr := NewReader(bytes.NewReader(comp))
		if n, err := io.Copy(io.Discard, zr); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
		zr.Close()
	}
}

// After Close the caller may read the rest of the source itself (pkg/fetch
// hashes the whole download even when decoding fails): the reader must not
// touch the source any more.
func TestCloseReleasesSource(t *testing.T) {
	_, comp := sample(t)
	bad := append(append([]byte{}, comp...), comp...)
	bad[len(comp)/2] ^= 0x10 // corrupt the first stream
	src := bytes.NewReader(bad)
	zr := NewReaderWorkers(iotest.HalfReader(src), 2)
	if _, err := io.ReadAll(zr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	zr.Close()
	before := src.Len()
	time.Sleep(50 * time.Millisecond)
	if src.Len() != before {
		t.Fatalf("source read after Close (%d -> %d bytes left)", before, src.Len())
	}
}
