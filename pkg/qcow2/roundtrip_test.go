package qcow2

import (
	"bytes"
	"context"
	"crypto/sha512"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Acceptance 1: what we write passes qemu-img check and compares identical to the raw.
func TestWriteIsCleanForQemu(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"plain", Options{}},
		{"compressed", Options{Compress: true}},
		{"compat-0.10", Options{Version: 2}},
		{"compat-0.10-compressed", Options{Version: 2, Compress: true, Workers: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".qcow2")
			writeQcow2(t, raw, out, tc.opts)
			qemuCheckCompare(t, out, raw)
			st, _ := os.Stat(out)
			// ~3.5 MiB of data; holes and the 1 MiB of written zeros must not be stored.
			if limit := int64(4 << 20); st.Size() > limit {
				t.Errorf("image is %d bytes, want under %d (holes or zero clusters stored?)", st.Size(), limit)
			}
			if tc.opts.Compress && st.Size() > 3<<20 {
				t.Errorf("compressed image is %d bytes: text clusters were not compressed", st.Size())
			}
			back := filepath.Join(dir, tc.name+".back.raw")
			if err := toRaw(t, out, back); err != nil {
				t.Fatal(err)
			}
			sameFile(t, back, raw)
		})
	}
}

// Acceptance 2: images written by qemu-img convert read back byte-identical, as a sparse raw.
func TestReadQemuImages(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	clusters := []string{"512", "4k", "64k", "2M"}
	if testing.Short() { // the race run: every kind of table, fewer cluster sizes
		clusters = []string{"4k", "64k"}
	}
	for _, compat := range []string{"0.10", "1.1"} {
		for _, compress := range []bool{false, true} {
			for _, cluster := range clusters {
				name := fmt.Sprintf("compat%s-c%v-%s", compat, compress, cluster)
				t.Run(name, func(t *testing.T) {
					img := filepath.Join(dir, name+".qcow2")
					args := []string{"convert", "-f", "raw", "-O", "qcow2", "-o", "compat=" + compat + ",cluster_size=" + cluster}
					if compress {
						args = append(args, "-c")
					}
					testutil.QemuImg(t, append(args, raw, img)...)
					out := filepath.Join(dir, name+".raw")
					if err := toRaw(t, img, out); err != nil {
						t.Fatal(err)
					}
					sameFile(t, out, raw)
					if a := testutil.AllocatedBytes(t, out); a > 8<<20 {
						t.Errorf("raw output occupies %d bytes: not sparse", a)
					}
				})
			}
		}
	}
}

// The reader is random access: reads at arbitrary offsets and lengths match the raw.
func TestReadAtRandomAccess(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	want, _ := os.ReadFile(raw)
	img := filepath.Join(dir, "c.qcow2")
	testutil.QemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=4k", raw, img)
	r := openQcow2(t, img)
	if r.Size() != int64(len(want)) {
		t.Fatalf("virtual size %d, want %d", r.Size(), len(want))
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 300; i++ {
		off := rng.Int63n(int64(len(want)))
		n := rng.Intn(200 << 10)
		got := make([]byte, n)
		k, err := r.ReadAt(got, off)
		end := min(off+int64(n), int64(len(want)))
		if k != int(end-off) || (err != nil && err != io.EOF) || string(got[:k]) != string(want[off:end]) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; content differs or wrong count", n, off, k, err)
		}
	}
}

// The stream's length is known up front, and its bytes are a clean qcow2 of the raw.
func TestStreamWriter(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	in, _ := os.Open(raw)
	defer in.Close()
	s, err := NewStreamWriter(in)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "stream.qcow2")
	f, _ := os.Create(out)
	n, err := io.Copy(f, s)
	f.Close()
	if err != nil || n != s.Size() {
		t.Fatalf("copied %d bytes (%v), Size() said %d", n, err, s.Size())
	}
	qemuCheckCompare(t, out, raw)
	// Seek back and read again: an HTTP retry rewinds the body.
	if _, err := s.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var again countingWriter
	if _, err := s.WriteTo(&again); err != nil || int64(again) != s.Size() {
		t.Fatalf("WriteTo after rewind: %d bytes, %v", again, err)
	}
	if err := toRaw(t, out, filepath.Join(dir, "stream.raw")); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dir, "stream.raw"), raw)
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// A qcow2 source converts to qcow2 again (oem set on a downloaded image writes this way).
func TestQcow2ToQcow2(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	img := filepath.Join(dir, "in.qcow2")
	testutil.QemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "compat=0.10", raw, img)
	r := openQcow2(t, img)
	out := filepath.Join(dir, "out.qcow2")
	o, _ := os.Create(out)
	defer o.Close()
	if err := Write(context.Background(), r, o, Options{Compress: true}); err != nil {
		t.Fatal(err)
	}
	qemuCheckCompare(t, out, raw)
}

// With Hash set, the digest the writer computes is the file's own (tables first, then data,
// written once front to back), and the image is as clean for qemu as the default one.
func TestWriteHashesInOrder(t *testing.T) {
	dir := t.TempDir()
	raw := makeRaw(t, dir)
	for _, version := range []uint32{3, 2} {
		out := filepath.Join(dir, fmt.Sprintf("v%d.qcow2", version))
		h := sha512.New()
		writeQcow2(t, raw, out, Options{Version: version, Hash: h, Workers: 3})
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := h.Sum(nil), sha512.Sum512(b); !bytes.Equal(got, want[:]) {
			t.Errorf("v%d: the writer's sha512 is not the file's", version)
		}
		qemuCheckCompare(t, out, raw)
		// the 1 MiB of written zeros is stored in this mode; holes still are not
		if limit := int64(5 << 20); int64(len(b)) > limit {
			t.Errorf("v%d: image is %d bytes, want under %d (holes stored?)", version, len(b), limit)
		}
		back := filepath.Join(dir, fmt.Sprintf("v%d.raw", version))
		if err := toRaw(t, out, back); err != nil {
			t.Fatal(err)
		}
		sameFile(t, back, raw)
	}
}
