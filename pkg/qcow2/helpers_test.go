package qcow2

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

const testDiskSize = 48<<20 + 3*512 // not a multiple of the cluster size

// makeRaw writes a sparse raw disk with scattered random, text and explicitly written zero data,
// including a partial last cluster.
func makeRaw(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(testDiskSize); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	random := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	text := []byte(strings.Repeat("set oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n", 4000))
	writes := []struct {
		off  int64
		data []byte
	}{
		{0, random(4096)},                // "MBR/GPT"
		{1 << 20, text},                  // compressible text
		{3<<20 + 100, random(300 << 10)}, // unaligned random
		{8 << 20, make([]byte, 1<<20)},   // allocated zeros
		{9<<20 + 512, random(512)},       // a single sector
		{20 << 20, append(text[:70000], random(70000)...)},
		{33<<20 - 4096, random(8192)},       // crosses an L2 boundary for 4 KiB clusters
		{testDiskSize - 1024, random(1024)}, // the partial last cluster
	}
	for _, w := range writes {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// qemuCompare fails unless qemu-img check finds no problem in img and its content equals raw.
func qemuCheckCompare(t testing.TB, img, raw string) {
	t.Helper()
	out := testutil.QemuImg(t, "check", img)
	if !strings.Contains(out, "No errors were found") {
		t.Fatalf("qemu-img check %s:\n%s", img, out)
	}
	testutil.QemuImg(t, "compare", "-f", "qcow2", "-F", "raw", img, raw)
}

// openRaw opens a raw image read-only as a vdisk source, closed when the test ends.
func openRaw(t testing.TB, raw string) *vdisk.File {
	t.Helper()
	in, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	src, err := vdisk.NewFile(in, false)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func writeQcow2(t testing.TB, raw, out string, opts Options) {
	t.Helper()
	src := openRaw(t, raw)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Write(context.Background(), src, f, opts); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// openQcow2 opens the qcow2 image img, closed when the test ends.
func openQcow2(t testing.TB, img string) *Reader {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := OpenFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func toRaw(t testing.TB, img, out string) error {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := OpenFile(f)
	if err != nil {
		return err
	}
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	return CopyToRaw(context.Background(), r, o, 0, nil)
}

func sameFile(t testing.TB, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s and %s differ (%d and %d bytes)", a, b, len(x), len(y))
	}
}
