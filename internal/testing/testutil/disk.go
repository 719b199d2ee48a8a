package testutil

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// SparseRaw writes dir/disk.raw: a 32 MiB sparse raw disk with ~3 MiB of random and text data.
func SparseRaw(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(32 << 20)
	rng := rand.New(rand.NewSource(7))
	data := make([]byte, 2<<20)
	rng.Read(data)
	f.WriteAt(data, 1<<20)
	f.WriteAt([]byte(strings.Repeat("linux_append=\"flatcar.autologin\"\n", 30000)), 20<<20)
	return p
}

// AllocatedBytes is the space the file at p takes on disk (less than its size when sparse).
func AllocatedBytes(t testing.TB, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
