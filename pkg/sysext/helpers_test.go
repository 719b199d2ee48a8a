package sysext

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// standInBinary writes an executable shell script named name that prints its name, the way
// the stand-in guest's "kubelet" does.
func standInBinary(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho stand-in "+name+" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// bigBinary writes size bytes that compress roughly like a Go binary (random runs mixed with
// repeated text), so the squashfs writer has real compression work and multi-block files.
func bigBinary(t testing.TB, p string, size int64) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewSource(42))
	chunk := make([]byte, 64<<10)
	text := bytes.Repeat([]byte("runtime.gopanic kubelet k8s.io/apimachinery/pkg/util "), 2000)
	for written := int64(0); written < size; {
		n := int64(len(chunk))
		if size-written < n {
			n = size - written
		}
		if rng.Intn(2) == 0 {
			rng.Read(chunk[:n])
		} else {
			copy(chunk[:n], text[rng.Intn(1000):])
		}
		if _, err := f.Write(chunk[:n]); err != nil {
			t.Fatal(err)
		}
		written += n
	}
	return p
}

// tarGz writes a .tar.gz holding files (name -> content), mode 0755, as the CNI plugins and
// crictl release archives are.
func tarGz(t *testing.T, p string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg, Uid: 1001, Gid: 1001}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// unsquashfsList runs `unsquashfs -lls` and returns path -> "mode owner size" for each entry.
type lsEntry struct{ mode, owner, size string }

func unsquashfsList(t testing.TB, img string) map[string]lsEntry {
	t.Helper()
	out := testutil.MustRun(t, "unsquashfs", "-lls", "-no-progress", img)
	m := map[string]lsEntry{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// -rwxr-xr-x root/root  1234 2026-12-01 05:00 squashfs-root/usr/bin/kubelet
		if len(f) < 6 || !strings.HasPrefix(f[len(f)-1], "squashfs-root") {
			continue
		}
		p := strings.TrimPrefix(strings.TrimPrefix(f[len(f)-1], "squashfs-root"), "/")
		m[p] = lsEntry{mode: f[0], owner: f[1], size: f[2]}
	}
	if len(m) == 0 {
		t.Fatalf("unsquashfs -lls listed nothing:\n%s", out)
	}
	return m
}

// mksquashfs builds a squashfs from dir with the real tool (for the bad-input fixtures, made
// independently of the writer under test).
func mksquashfs(t testing.TB, dir, out string, args ...string) string {
	t.Helper()
	testutil.MustRun(t, "mksquashfs", append([]string{dir, out, "-noappend", "-all-root", "-no-progress", "-quiet"}, args...)...)
	return out
}
