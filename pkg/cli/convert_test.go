package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

func sameBytes(t *testing.T, a, b string) {
	t.Helper()
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("%s and %s differ", a, b)
	}
}

// onlyFiles fails unless dir holds exactly the named files (no outputs or temp files left).
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	raw := testutil.SparseRaw(t, dir)
	q := filepath.Join(dir, "out.qcow2")
	r := testutil.Run(t, "convert", raw, q, "--compress", "-o", "json").MustSucceed(t)
	var res map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res["outputFormat"] != "qcow2" || res["compressed"] != true {
		t.Fatalf("json report: %v %s", err, r.Stdout)
	}
	if out := testutil.QemuImg(t, "check", q); !strings.Contains(out, "No errors") {
		t.Fatal(out)
	}
	testutil.QemuImg(t, "compare", "-f", "qcow2", "-F", "raw", q, raw)

	back := filepath.Join(dir, "back.raw")
	testutil.Run(t, "convert", q, back, "-q").MustSucceed(t)
	sameBytes(t, back, raw)
	if a := testutil.AllocatedBytes(t, back); a > 6<<20 {
		t.Fatalf("raw output occupies %d bytes: not sparse", a)
	}

	// .img is ambiguous: --to is required, and given, it works.
	img := filepath.Join(dir, "flatcar.img")
	testutil.Run(t, "convert", raw, img).MustFail(t, 2, "--to qcow2")
	testutil.Run(t, "convert", raw, img, "--to", "qcow2", "-q").MustSucceed(t)
	testutil.QemuImg(t, "compare", "-f", "qcow2", "-F", "raw", img, raw)
	testutil.Run(t, "convert", raw, img, "--to", "vmdk").MustFail(t, 2, "unknown output format")
	testutil.Run(t, "convert", raw, filepath.Join(dir, "x.raw"), "--compress").MustFail(t, 2, "--compress needs qcow2")
	testutil.Run(t, "convert", raw, dir+"/./disk.raw", "--to", "raw").MustFail(t, 2, "is the input itself")
	testutil.Run(t, "convert", filepath.Join(dir, "missing.qcow2"), filepath.Join(dir, "y.raw")).MustFail(t, 1, "does not exist")
	onlyFiles(t, dir, "back.raw", "disk.raw", "flatcar.img", "out.qcow2")
}

// Bad input: a clear error, exit 1, and no output (or temporary) file left behind.
func TestConvertBadInputLeavesNoOutput(t *testing.T) {
	dir := t.TempDir()
	raw := testutil.SparseRaw(t, dir)
	q := filepath.Join(dir, "in.qcow2")
	testutil.QemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, q)
	b, _ := os.ReadFile(q)
	os.WriteFile(q, b[:len(b)/2], 0o644)
	testutil.Run(t, "convert", q, filepath.Join(dir, "out.raw")).MustFail(t, 1, "truncated")
	b[32+3] = 2 // crypt_method: LUKS
	os.WriteFile(q, b, 0o644)
	testutil.Run(t, "convert", q, filepath.Join(dir, "out.qcow2")).MustFail(t, 1, "encrypted images (LUKS encryption): not supported")
	onlyFiles(t, dir, "disk.raw", "in.qcow2")
}

// Disk full while writing: exit 1 naming the problem, nothing left on the full file system.
func TestConvertDiskFull(t *testing.T) {
	testutil.RequireRoot(t, "mounting a small tmpfs")
	dir := t.TempDir()
	raw := testutil.SparseRaw(t, dir)
	mnt := filepath.Join(dir, "small")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		testutil.RequireEnv(t, fmt.Errorf("%v %s", err, out), "mounting a 1 MiB tmpfs")
	}
	defer exec.Command("umount", mnt).Run()
	for _, out := range []string{"full.qcow2", "full.raw"} {
		testutil.Run(t, "convert", raw, filepath.Join(mnt, out)).MustFail(t, 1, "no space left on device")
	}
	onlyFiles(t, mnt)
}

// Acceptance 3: a Flatcar-layout disk survives raw -> qcow2 -> raw, and oem show reads the OEM
// partition of the qcow2 directly.
func TestFlatcarImageRoundTrip(t *testing.T) {
	raw := flatcardisk.Build(t, flatcardisk.Options{})
	dir := t.TempDir()
	for _, compress := range []bool{false, true} {
		q := filepath.Join(dir, "flatcar.qcow2")
		args := []string{"convert", raw, q, "-q"}
		if compress {
			args = append(args, "--compress")
		}
		testutil.Run(t, args...).MustSucceed(t)
		show := testutil.Run(t, "oem", "show", q, "-o", "json").MustSucceed(t)
		if !strings.Contains(show.Stdout, `"qemu"`) {
			t.Fatalf("oem show on the qcow2 does not report oem_id qemu:\n%s", show.Stdout)
		}
		back := filepath.Join(dir, "back.raw")
		testutil.Run(t, "convert", q, back, "-q").MustSucceed(t)
		sameBytes(t, back, raw)
		testutil.Run(t, "oem", "show", back).MustSucceed(t)
		os.Remove(q)
		os.Remove(back)
	}
}

// A compressed qcow2 (as Flatcar ships) holding zero-flag clusters, a compressed cluster that
// decodes to zeros, and zero runs inside data clusters: the raw output must be byte-identical to
// qemu-img's and just as sparse (the zeros become holes, not written blocks).
func TestConvertCompressedZeroClustersToSparseRaw(t *testing.T) {
	testutil.RequireTools(t, "qemu-img", "qemu-io")
	dir := t.TempDir()
	raw := testutil.SparseRaw(t, dir) // data at 1-3 MiB and from 20 MiB
	in := filepath.Join(dir, "in.qcow2")
	testutil.QemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, in)
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
	if out := testutil.QemuImg(t, "map", "--output=json", in); !strings.Contains(out, `"present": true, "zero": true`) {
		t.Fatalf("the input lacks zero-flag clusters:\n%s", out)
	}
	if out := testutil.QemuImg(t, "check", in); !strings.Contains(out, "No errors") || strings.Contains(out, " 0.00% compressed") {
		t.Fatalf("the input is damaged or has no compressed clusters:\n%s", out)
	}
	ours, theirs := filepath.Join(dir, "ours.raw"), filepath.Join(dir, "qemu.raw")
	testutil.Run(t, "convert", in, ours, "-q").MustSucceed(t)
	testutil.QemuImg(t, "convert", "-f", "qcow2", "-O", "raw", in, theirs)
	testutil.MustRun(t, "cmp", ours, theirs)
	a, q := testutil.AllocatedBytes(t, ours), testutil.AllocatedBytes(t, theirs)
	if a > q {
		t.Fatalf("our raw output occupies %d bytes, qemu-img's %d: zeros were written instead of left as holes", a, q)
	}
	if st, _ := os.Stat(ours); a >= st.Size()/4 {
		t.Fatalf("our raw output occupies %d of %d bytes: not sparse", a, st.Size())
	}
}
