package main

import (
	"bytes"
	"strings"
	"testing"
)

// A stream as `go test -json` writes it: a passing package with a subtest, a skip through
// testutil, a failing test, and a package that does not build.
const stream = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestOK"}
{"Action":"run","Package":"example/a","Test":"TestOK/sub"}
{"Action":"output","Package":"example/a","Test":"TestOK/sub","Output":"--- PASS: TestOK/sub (0.00s)\n"}
{"Action":"pass","Package":"example/a","Test":"TestOK/sub","Elapsed":0}
{"Action":"pass","Package":"example/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestTool"}
{"Action":"output","Package":"example/a","Test":"TestTool","Output":"    require.go:84: SKIP: mkfs.btrfs is not installed (run scripts/install-deps.sh)\n"}
{"Action":"output","Package":"example/a","Test":"TestTool","Output":"--- SKIP: TestTool (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestTool","Elapsed":0}
{"Action":"pass","Package":"example/a","Elapsed":0.5}
{"Action":"run","Package":"example/b","Test":"TestBad"}
{"Action":"output","Package":"example/b","Test":"TestBad","Output":"    b_test.go:9: exit code 1, want 0\n"}
{"Action":"fail","Package":"example/b","Test":"TestBad","Elapsed":1.5}
{"Action":"fail","Package":"example/b","Elapsed":1.6}
{"ImportPath":"example/c","Action":"build-output","Output":"c.go:3:1: syntax error\n"}
{"Action":"output","Package":"example/c","Output":"FAIL\texample/c [build failed]\n"}
{"Action":"fail","Package":"example/c","Elapsed":0}
not json: the linker said something
`

func TestSummary(t *testing.T) {
	var out bytes.Buffer
	r := newRun(&out, true)
	if err := r.follow(strings.NewReader(stream), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := r.counts.String(), "2 passed, 2 failed, 1 skipped"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	for _, w := range []string{
		"ok   example/a 0.5s",
		"SKIP example/a TestTool: require.go:84: SKIP: mkfs.btrfs is not installed",
		"--- FAIL example/b TestBad (1.5s)\n    b_test.go:9: exit code 1, want 0\n",
		"FAIL example/b 1.6s",
		"FAIL\texample/c [build failed]",
		"c.go:3:1: syntax error",
		"not json: the linker said something",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if u := r.unfinished(); len(u) != 0 {
		t.Errorf("unfinished %v in a complete stream", u)
	}
}

// A stream cut off mid-test (go test killed) names the test that never ended.
func TestUnfinished(t *testing.T) {
	r := newRun(&bytes.Buffer{}, true)
	r.follow(strings.NewReader(`{"Action":"run","Package":"example/a","Test":"TestHang"}
{"Action":"output","Package":"example/a","Test":"TestHang","Output":"=== RUN   TestHang\n"}
`), nil)
	if u := r.unfinished(); len(u) != 1 || u[0] != "example/a TestHang" {
		t.Fatalf("unfinished %v", u)
	}
}
