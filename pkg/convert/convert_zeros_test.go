package convert_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

func allocatedBytes(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A compressed qcow2 (as Flatcar ships) holding zero-flag clusters, a compressed cluster that
// decodes to zeros, and zero runs inside data clusters: the raw output must be byte-identical to
// qemu-img's and just as sparse (the zeros become holes, not written blocks).
func TestConvertCompressedZeroClustersToSparseRaw(t *testing.T) {
	testutil.RequireTools(t, "qemu-img", "qemu-io")
	dir := t.TempDir()
	raw := sparseRaw(t, dir) // data at 1-3 MiB and from 20 MiB
	in := filepath.Join(dir, "in.qcow2")
	qemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, in)
	for _, cmd := range []string{
		"write -c -P 0 8M 64k",  // a compressed cluster of zeros
		"write -z 12M 256k",     // zero-flag clusters where nothing was
		"write -z 2M 128k",      // zero-flag clusters over compressed data
		"write -c -P 7 16M 64k", // compressed data next to them
		"write -P 0 16M 4k",     // a zero 4 KiB block inside a data cluster
		"write -P 9 17M 64k",    // an uncompressed data cluster
		"write -P 0 17M 32k",    // half of it zeros
	} {
		if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", cmd, in).CombinedOutput(); err != nil {
			t.Fatalf("qemu-io %q: %v\n%s", cmd, err, out)
		}
	}
	if out := qemuImg(t, "map", "--output=json", in); !strings.Contains(out, `"present": true, "zero": true`) {
		t.Fatalf("the input lacks zero-flag clusters:\n%s", out)
	}
	if out := qemuImg(t, "check", in); !strings.Contains(out, "No errors") || strings.Contains(out, " 0.00% compressed") {
		t.Fatalf("the input is damaged or has no compressed clusters:\n%s", out)
	}
	ours, theirs := filepath.Join(dir, "ours.raw"), filepath.Join(dir, "qemu.raw")
	testutil.Run(t, "convert", in, ours, "-q").MustSucceed(t)
	qemuImg(t, "convert", "-f", "qcow2", "-O", "raw", in, theirs)
	if out, err := exec.Command("cmp", ours, theirs).CombinedOutput(); err != nil {
		t.Fatalf("cmp: %v\n%s", err, out)
	}
	a, q := allocatedBytes(t, ours), allocatedBytes(t, theirs)
	if a > q {
		t.Fatalf("our raw output occupies %d bytes, qemu-img's %d: zeros were written instead of left as holes", a, q)
	}
	if st, _ := os.Stat(ours); a >= st.Size()/4 {
		t.Fatalf("our raw output occupies %d of %d bytes: not sparse", a, st.Size())
	}
}
