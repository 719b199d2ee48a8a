package capo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// thousandDocuments is good.yaml repeated with distinct names: 1,000 documents.
func thousandDocuments(t testing.TB) []byte {
	good, err := os.ReadFile("../../testdata/lint/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for i := 0; i < 125; i++ {
		b.Write(bytes.ReplaceAll(good, []byte("demo"), []byte(fmt.Sprintf("demo%03d", i))))
		b.WriteString("\n---\n")
	}
	return b.Bytes()
}

// lintInputs reads a 1,000-document file completely and finds nothing wrong in it. Its speed target
// (under a second) is BenchmarkLintThousandDocuments's: a timing assertion in a test fails on a
// loaded CI machine without a bug.
func TestLintThousandDocuments(t *testing.T) {
	data := thousandDocuments(t)
	start := time.Now()
	rep, err := lintInputs(context.Background(), []lintInput{{Name: "big.yaml", Data: data}}, lintOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Documents != 1000 || len(rep.Findings) != 0 {
		t.Fatalf("%d documents, %d findings", rep.Documents, len(rep.Findings))
	}
	t.Logf("linted %d documents (%d KiB) in %v", rep.Documents, len(data)/1024, time.Since(start))
}

// The only performance target: lint on a 1,000-document file under a second (make bench
// runs this on a quiet machine; the result says ns/op).
func BenchmarkLintThousandDocuments(b *testing.B) {
	data := thousandDocuments(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := lintInputs(context.Background(), []lintInput{{Name: "big.yaml", Data: data}}, lintOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if perOp := b.Elapsed() / time.Duration(b.N); perOp > time.Second {
		b.Errorf("lint took %v per 1,000-document file; the target is under 1 s", perOp)
	}
}
