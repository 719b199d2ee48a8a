package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestLinesInAPipeHaveNoCarriageReturns(t *testing.T) {
	var buf bytes.Buffer
	r := To(&buf, Auto)("download", 2048)
	r.Write(make([]byte, 1024))
	r.Add(1024)
	r.Finish()
	out := buf.String()
	if strings.Contains(out, "\r") || !strings.Contains(out, "download: 2.0 KiB / 2.0 KiB (100%)") {
		t.Fatalf("unexpected progress output %q", out)
	}
	var over bytes.Buffer
	r = To(&over, Lines)("convert", 1000)
	r.Add(4096)
	r.Finish()
	if !strings.Contains(over.String(), "(100%)") {
		t.Fatalf("overshoot shown as %q", over.String())
	}
	var q bytes.Buffer
	r = To(&q, Quiet).Start("x", 10)
	r.Add(10)
	r.Finish()
	if q.Len() != 0 {
		t.Fatalf("quiet printed %q", q.String())
	}
}
