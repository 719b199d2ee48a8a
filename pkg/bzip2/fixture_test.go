package bzip2

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lbzip2Fixture is testdata/lbzip2-seq.bz2 (made by testdata/make-lbzip2-fixture.sh), checked
// against its recorded sha256: lbzip2's own stream shape without lbzip2 installed.
func lbzip2Fixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "lbzip2-seq.bz2"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join("testdata", "lbzip2-seq.bz2.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if want := strings.Fields(string(rec))[0]; hex.EncodeToString(sum[:]) != want {
		t.Fatalf("testdata/lbzip2-seq.bz2 has sha256 %x, recorded %s: re-run testdata/make-lbzip2-fixture.sh", sum, want)
	}
	return b
}

// seqText is what the fixture holds: the output of `seq 1 50000`.
func seqText() []byte {
	var b bytes.Buffer
	for i := 1; i <= 50000; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// lbzip2's multi-block stream, split at its block magics, decodes to exactly seq's output with
// any number of workers and with false magic candidates added.
func TestLbzip2Fixture(t *testing.T) {
	comp, want := lbzip2Fixture(t), seqText()
	for _, workers := range []int{1, 2, 3} {
		got, err := decompress(comp, workers)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("workers=%d: %d bytes, err %v; want %d bytes", workers, len(got), err, len(want))
		}
	}
	for _, step := range []int64{99991, 333331} {
		zr := NewReaderWorkers(bytes.NewReader(comp), 2).(*reader)
		zr.scan = fakeMagics(step)
		got, err := readAllClose(zr)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("false magics every %d bits: %d bytes, err %v; want %d bytes", step, len(got), err, len(want))
		}
	}
	agree(t, comp) // compress/bzip2 and dsnet read it the same
	cut := append([]byte{}, comp[:len(comp)-7]...)
	agree(t, cut)
	cut[len(cut)/2] ^= 0x10
	agree(t, cut)
}

func readAllClose(zr *reader) ([]byte, error) {
	defer zr.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(zr)
	return b.Bytes(), err
}
