package imagebuild

import (
	"reflect"
	"testing"
)

type writes []string

func (w *writes) Write(p []byte) (int, error) { *w = append(*w, string(p)); return len(p), nil }

// A library's lines under a step's: trimmed, after the prefix, one Write per Write (so the lines
// of concurrent downloads stay whole), as the closures it replaced printed them.
func TestIndentedKeepsLinesWhole(t *testing.T) {
	var got writes
	w := indented{&got, "  packer: "}
	w.Write([]byte("    qemu.flatcar: installed\n"))
	w.Write([]byte("a: 1\n\tb: 2 \r\n"))
	want := writes{"  packer: qemu.flatcar: installed\n", "  packer: a: 1\n  packer: b: 2\n"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
}
