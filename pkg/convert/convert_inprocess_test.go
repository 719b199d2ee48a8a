package convert_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// The conversions in this process (parallel deflate, parallel sparse copy), so the race run of
// make test sees their goroutines; the command tests cover the same through the binary.
func TestConvertInProcess(t *testing.T) {
	dir := t.TempDir()
	raw := testutil.SparseRaw(t, dir)
	want, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		in, out string
		opts    convert.Options
	}{
		{raw, "c.qcow2", convert.Options{To: disk.FormatQcow2, Compress: true, Workers: 3}},
		{"c.qcow2", "back.raw", convert.Options{To: disk.FormatRaw, Workers: 3}},
		{"c.qcow2", "v2.qcow2", convert.Options{To: disk.FormatQcow2, Compat: "0.10", Workers: 2}},
		{"v2.qcow2", "back2.raw", convert.Options{To: disk.FormatRaw}},
	}
	for _, s := range steps {
		in := s.in
		if !filepath.IsAbs(in) {
			in = filepath.Join(dir, in)
		}
		if _, err := convert.File(ctx, in, filepath.Join(dir, s.out), s.opts); err != nil {
			t.Fatalf("%s -> %s: %v", filepath.Base(in), s.out, err)
		}
	}
	testutil.QemuImg(t, "check", filepath.Join(dir, "c.qcow2"))
	testutil.QemuImg(t, "check", filepath.Join(dir, "v2.qcow2"))
	for _, back := range []string{"back.raw", "back2.raw"} {
		got, err := os.ReadFile(filepath.Join(dir, back))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs from the input", back)
		}
	}
}
