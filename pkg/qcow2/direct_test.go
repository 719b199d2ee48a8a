package qcow2

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func fdDirect(t *testing.T, f *os.File) bool {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.O_DIRECT != 0
}

// directWorks says whether dir's filesystem takes an aligned O_DIRECT write.
func directWorks(t *testing.T, dir string) bool {
	p := filepath.Join(dir, "probe-direct")
	defer os.Remove(p)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Write(make([]byte, 1<<20))
	return err == nil
}

// memTarget is a Target that is not a file: direct writes never apply.
type memTarget struct{ b []byte }

func (m *memTarget) WriteAt(p []byte, off int64) (int, error) {
	if n := off + int64(len(p)); n > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, n-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}
func (m *memTarget) Truncate(n int64) error { m.b = m.b[:min(n, int64(len(m.b)))]; return nil }

// The direct writer writes aligned clusters past the page cache, and a write it cannot do so
// (misaligned buffer or offset) turns it off and still lands; the file holds every byte.
func TestDirectWriterWritesAndFallsBack(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} { // ext4 (or whatever TMPDIR is) and tmpfs
		f, err := os.CreateTemp(dir, "direct-*")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f.Name()) })
		aligned := make([]byte, 1<<20) // a large allocation: page-aligned, as the pipeline's jobs
		for i := range aligned {
			aligned[i] = byte(i*7 + 1)
		}
		d := newDirectWriter(f)
		if !d.on && directWorks(t, dir) {
			t.Errorf("%s: O_DIRECT works here but the writer did not turn it on", dir)
		}
		if got := fdDirect(t, f); got != d.on {
			t.Errorf("%s: the file's O_DIRECT is %v, the writer says %v", dir, got, d.on)
		}
		if err := d.writeAt(aligned, 0); err != nil {
			t.Fatal(err)
		}
		wasOn := d.on
		if !wasOn && directWorks(t, dir) {
			t.Errorf("%s: an aligned write turned direct writes off", dir)
		}
		odd := append(make([]byte, 1), aligned[:64<<10]...)[1:] // misaligned by one byte
		if err := d.writeAt(odd, 1<<20); err != nil {
			t.Fatal(err)
		}
		if d.on {
			t.Errorf("%s: a misaligned write left direct writes on", dir)
		}
		if err := d.writeAt([]byte("tail"), 1<<20+64<<10); err != nil {
			t.Fatal(err)
		}
		d.off()
		if fdDirect(t, f) {
			t.Errorf("%s: O_DIRECT still set after off", dir)
		}
		f.Close()
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]byte{}, aligned...), aligned[:64<<10]...), "tail"...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the file does not hold what was written (direct at first: %v)", filepath.Base(dir), wasOn)
		}
	}
	m := &memTarget{}
	d := newDirectWriter(m)
	if d.on {
		t.Fatal("direct writes on for a target that is not a file")
	}
	if err := d.writeAt([]byte("abc"), 2); err != nil || string(m.b[2:]) != "abc" {
		t.Fatalf("memory target: %q, %v", m.b, err)
	}
}
