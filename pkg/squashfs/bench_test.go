package squashfs

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWriteTree writes BENCH_TREE (default: a generated test tree) with BENCH_COMP
// (gzip or zstd): `go test -bench WriteTree -cpuprofile` shows where the time goes.
func BenchmarkWriteTree(b *testing.B) {
	src := os.Getenv("BENCH_TREE")
	if src == "" {
		src = tree(b)
	}
	comp, level := os.Getenv("BENCH_COMP"), 1
	if comp == "zstd" {
		level = 3
	}
	out := filepath.Join(b.TempDir(), "img.sqfs")
	for i := 0; i < b.N; i++ {
		writeTree(b, src, out, Options{Compression: comp, Level: level, ModTime: epoch})
	}
}
