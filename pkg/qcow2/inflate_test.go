package qcow2

import (
	"bytes"
	stdflate "compress/flate"
	"io"
	"math/rand"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/flate"
)

// clusterInputs are 64 KiB clusters of the kinds a disk holds.
func clusterInputs() map[string][]byte {
	rng := rand.New(rand.NewSource(7))
	const cs = 64 << 10
	random := make([]byte, cs)
	rng.Read(random)
	text := bytes.Repeat([]byte("GRUB_CMDLINE_LINUX=\"flatcar.oem.id=openstack console=ttyS0\"\n"), cs/60+1)[:cs]
	mixed := make([]byte, cs)
	for i := 0; i < cs; i += 512 {
		switch rng.Intn(4) {
		case 0:
			rng.Read(mixed[i : i+512])
		case 1:
			copy(mixed[i:], text[rng.Intn(4000):][:512])
		case 2: // short-distance runs
			for k := i; k < i+512; k++ {
				mixed[k] = byte(k % (1 + rng.Intn(7)))
			}
		}
	}
	rle := bytes.Repeat([]byte{0xab}, cs)
	rle[100] = 1
	return map[string][]byte{"random": random, "text": text, "mixed": mixed, "rle": rle, "zero": make([]byte, cs)}
}

type compressFn func([]byte) []byte

// deflateWith compresses b in one go with the writer newWriter makes.
func deflateWith(b []byte, newWriter func(io.Writer) (io.WriteCloser, error)) []byte {
	var buf bytes.Buffer
	w, _ := newWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func compressors() map[string]compressFn {
	m := map[string]compressFn{
		"qemu-window": func(b []byte) []byte { // what our writer and qemu-img -c write
			return deflateWith(b, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriterWindow(w, deflateWindow) })
		},
	}
	for _, lvl := range []int{stdflate.HuffmanOnly, stdflate.NoCompression, 1, 6, 9} {
		m["std"+string(rune('0'+lvl+2))] = func(b []byte) []byte {
			return deflateWith(b, func(w io.Writer) (io.WriteCloser, error) { return stdflate.NewWriter(w, lvl) })
		}
	}
	for _, lvl := range []int{-2, 1, 5, 9} {
		m["klauspost"+string(rune('0'+lvl+2))] = func(b []byte) []byte {
			return deflateWith(b, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, lvl) })
		}
	}
	// Fixed-Huffman blocks: a tiny stream the compressors emit that way.
	m["fixed-small"] = func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := stdflate.NewWriter(&buf, 9)
		for i := 0; i < len(b); i += 100 {
			w.Write(b[i:min(i+100, len(b))])
			w.Flush()
		}
		w.Close()
		return buf.Bytes()
	}
	return m
}

func reference(src []byte, n int) ([]byte, error) {
	out := make([]byte, n)
	_, err := io.ReadFull(flate.NewReader(bytes.NewReader(src)), out)
	return out, err
}

// Every kind of cluster, from every compressor and level (stored, fixed and dynamic blocks,
// Huffman-only, 4 KiB and 32 KiB windows), with the sector padding qemu leaves after the
// stream, decodes to the original.
func TestInflateClusterMatchesInput(t *testing.T) {
	var f inflater
	for dn, data := range clusterInputs() {
		for cn, comp := range compressors() {
			src := append(comp(data), make([]byte, 300)...) // padding to the sector, as in an image
			out := make([]byte, len(data))
			if err := f.inflateCluster(out, src); err != nil {
				t.Errorf("%s/%s: %v", dn, cn, err)
				continue
			}
			if !bytes.Equal(out, data) {
				t.Errorf("%s/%s: decoded bytes differ", dn, cn)
			}
		}
	}
}

// Damaged streams fail or decode as the reference decoder does; they never panic.
func TestInflateClusterDamaged(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var f inflater
	inputs := clusterInputs()
	comps := compressors()
	for dn, data := range inputs {
		for cn, comp := range comps {
			good := comp(data)
			for i := 0; i < 40; i++ {
				bad := append([]byte(nil), good...)
				switch i % 3 {
				case 0:
					bad = bad[:rng.Intn(len(bad))]
				default:
					for k := 0; k < 1+rng.Intn(4); k++ {
						bad[rng.Intn(len(bad))] ^= byte(1 << rng.Intn(8))
					}
				}
				out := make([]byte, len(data))
				err := f.inflateCluster(out, bad)
				want, werr := reference(bad, len(data))
				if err == nil && werr == nil && !bytes.Equal(out, want) {
					d := 0
					for d < len(out) && out[d] == want[d] {
						d++
					}
					t.Fatalf("a damaged stream (case %d, %d of %d bytes) decoded differently from klauspost's decoder from byte %d: %q vs %q", i, len(bad), len(good), d, out[d-5:], want[d-5:])
				}
				// As zlib (qemu): a cluster that is full before the cut decodes; klauspost's
				// decoder fails some of those, so only incompressible data is checked here.
				if err == nil && i%3 == 0 && dn == "random" && len(bad) < len(good)*9/10 {
					t.Fatalf("%s/%s cut to %d of %d bytes decoded without error", dn, cn, len(bad), len(good))
				}
			}
		}
	}
}

func BenchmarkInflateCluster(b *testing.B) {
	for _, dn := range []string{"mixed", "text", "random"} {
		data := clusterInputs()[dn]
		src := compressors()["qemu-window"](data)
		out := make([]byte, len(data))
		b.Run(dn+"/ours", func(b *testing.B) {
			var f inflater
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if err := f.inflateCluster(out, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(dn+"/klauspost", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			fr := flate.NewReader(bytes.NewReader(src))
			for i := 0; i < b.N; i++ {
				fr.(flate.Resetter).Reset(bytes.NewReader(src), nil)
				if _, err := io.ReadFull(fr, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzInflateCluster: any input decodes without a panic, and when both decoders fill the
// cluster they agree (ours also accepts streams cut after the cluster is full, as zlib does).
func FuzzInflateCluster(f *testing.F) {
	for _, data := range clusterInputs() {
		for _, comp := range compressors() {
			f.Add(comp(data[:4096]))
		}
	}
	var inf inflater
	f.Fuzz(func(t *testing.T, src []byte) {
		out := make([]byte, 4096)
		err := inf.inflateCluster(out, src)
		want, werr := reference(src, len(out))
		if err == nil && werr == nil && !bytes.Equal(out, want) {
			t.Fatal("decoded differently from klauspost's decoder")
		}
	})
}

// BenchmarkInflateImage decodes every compressed cluster of the image INFLATE_IMAGE names
// (e.g. scripts/bench/inflate.sh's inputs) on one core, the compressed bytes in memory, and
// reports the process CPU time per pass: the decoder's share of a convert, without the I/O.
// INFLATE_VERIFY=1 first checks every cluster against klauspost/compress's decoder.
func BenchmarkInflateImage(b *testing.B) {
	path := os.Getenv("INFLATE_IMAGE")
	if path == "" {
		b.Fatal("set INFLATE_IMAGE to the path of a compressed qcow2")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	r, err := open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	var srcs [][]byte
	for vc := range r.Size() / r.cs {
		m, err := r.lookup(vc)
		if err != nil {
			b.Fatal(err)
		}
		if m.kind == kindCompressed {
			srcs = append(srcs, data[m.host:min(m.host+m.csize, int64(len(data)))])
		}
	}
	out := make([]byte, r.cs)
	var f inflater
	if os.Getenv("INFLATE_VERIFY") != "" {
		for i, s := range srcs {
			want, werr := reference(s, len(out))
			if err := f.inflateCluster(out, s); err != nil || werr != nil || !bytes.Equal(out, want) {
				b.Fatalf("cluster %d of %d decodes differently (%v, %v)", i, len(srcs), err, werr)
			}
		}
	}
	b.SetBytes(int64(len(srcs)) * r.cs)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		for _, s := range srcs {
			if err := f.inflateCluster(out, s); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/pass")
	b.ReportMetric(float64(len(srcs)), "clusters")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
