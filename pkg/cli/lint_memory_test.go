package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// lintMaxRSS runs flatcar-capo lint FILE and returns its exit code, output (stdout and stderr)
// and peak resident memory, in MiB. The peak is the child's own VmHWM, read from /proc while it
// runs: its rusage's maxrss is no good here, since Go starts children with vfork and Linux
// carries the parent's high-water mark (the whole test process's) into the child's at exec.
func lintMaxRSS(t *testing.T, file string) (int, string, int64) {
	t.Helper()
	cmd := exec.Command(testutil.Binary(t), "lint", file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatalf("lint did not run: %v", err)
	}
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var max int64
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if b, err := os.ReadFile(status); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kib int64
					if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kib); err == nil && kib > max {
						max = kib
					}
				}
			}
			select {
			case <-done:
				peak <- max / 1024
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	return cmd.ProcessState.ExitCode(), output.String(), <-peak
}

// lint's memory is bounded, not ~150 times the file: it read every document into a tree first
// (a 4 MiB file of tiny documents took 600 MB, 20 MiB took 3 GB). Now it checks each document as
// it reads it and keeps only the CAPI/CAPO/ORC objects the rules across documents need, up to a
// limit past which it refuses (exit 2) with what to do, and a document larger than any
// Kubernetes object is refused before its tree is built.
func TestLintMemoryIsBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tiny := write("tiny.yaml", strings.Repeat("a: b\n---\n", 4<<20/9))
	code, stderr, rss := lintMaxRSS(t, tiny)
	t.Logf("lint of 4 MiB of tiny documents: exit %d, max RSS %d MiB", code, rss)
	if code != 0 || !strings.Contains(stderr, "466033 document(s) checked") {
		t.Errorf("exit %d, want 0 with every document checked:\n%s", code, stderr)
	}
	if rss > 150 {
		t.Errorf("lint of a 4 MiB file peaked at %d MiB, want under 150 MiB", rss)
	}

	var b strings.Builder
	for i := 0; i < 80000; i++ {
		fmt.Fprintf(&b, "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Machine\nmetadata: {name: m%d}\n---\n", i)
	}
	capi := write("capi.yaml", b.String())
	code, stderr, rss = lintMaxRSS(t, capi)
	t.Logf("lint of 80,000 tiny Machines: exit %d, max RSS %d MiB", code, rss)
	if code != 2 || !strings.Contains(stderr, "lint fewer clusters at a time") {
		t.Errorf("exit %d, want 2 naming what to do:\n%s", code, stderr)
	}
	if rss > 400 {
		t.Errorf("lint of 80,000 tiny Machines peaked at %d MiB, want under 400 MiB", rss)
	}

	b.Reset()
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n")
	for i := 0; i < 300000; i++ {
		fmt.Fprintf(&b, "  k%d: v\n", i)
	}
	code, stderr, rss = lintMaxRSS(t, write("big.yaml", b.String()))
	t.Logf("lint of one 3.6 MiB document: exit %d, max RSS %d MiB", code, rss)
	if code != 2 || !strings.Contains(stderr, "larger than 2 MiB") || !strings.Contains(stderr, "1.5 MiB") {
		t.Errorf("exit %d, want 2 refusing the document:\n%s", code, stderr)
	}
}
