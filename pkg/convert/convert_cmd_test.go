package convert_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// sparseRaw writes a 32 MiB sparse raw disk with ~3 MiB of random and text data.
func sparseRaw(t *testing.T, dir string) string {
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

func qemuImg(t *testing.T, args ...string) string {
	t.Helper()
	testutil.RequireTools(t, "qemu-img")
	return testutil.MustRun(t, "qemu-img", args...)
}

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
	raw := sparseRaw(t, dir)
	q := filepath.Join(dir, "out.qcow2")
	r := testutil.Run(t, "convert", raw, q, "--compress", "-o", "json").MustSucceed(t)
	var res map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res["outputFormat"] != "qcow2" || res["compressed"] != true {
		t.Fatalf("json report: %v %s", err, r.Stdout)
	}
	if out := qemuImg(t, "check", q); !strings.Contains(out, "No errors") {
		t.Fatal(out)
	}
	qemuImg(t, "compare", "-f", "qcow2", "-F", "raw", q, raw)

	back := filepath.Join(dir, "back.raw")
	testutil.Run(t, "convert", q, back, "-q").MustSucceed(t)
	sameBytes(t, back, raw)
	var st syscall.Stat_t
	syscall.Stat(back, &st)
	if st.Blocks*512 > 6<<20 {
		t.Fatalf("raw output occupies %d bytes: not sparse", st.Blocks*512)
	}

	// .img is ambiguous: --to is required, and given, it works.
	img := filepath.Join(dir, "flatcar.img")
	testutil.Run(t, "convert", raw, img).MustFail(t, 2, "--to qcow2")
	testutil.Run(t, "convert", raw, img, "--to", "qcow2", "-q").MustSucceed(t)
	qemuImg(t, "compare", "-f", "qcow2", "-F", "raw", img, raw)
	testutil.Run(t, "convert", raw, img, "--to", "vmdk").MustFail(t, 2, "unknown output format")
	testutil.Run(t, "convert", raw, filepath.Join(dir, "x.raw"), "--compress").MustFail(t, 2, "--compress needs qcow2")
	testutil.Run(t, "convert", raw, dir+"/./disk.raw", "--to", "raw").MustFail(t, 2, "is the input itself")
	testutil.Run(t, "convert", filepath.Join(dir, "missing.qcow2"), filepath.Join(dir, "y.raw")).MustFail(t, 1, "does not exist")
	onlyFiles(t, dir, "back.raw", "disk.raw", "flatcar.img", "out.qcow2")
}

// Bad input: a clear error, exit 1, and no output (or temporary) file left behind.
func TestConvertBadInputLeavesNoOutput(t *testing.T) {
	dir := t.TempDir()
	raw := sparseRaw(t, dir)
	q := filepath.Join(dir, "in.qcow2")
	qemuImg(t, "convert", "-c", "-f", "raw", "-O", "qcow2", raw, q)
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
	raw := sparseRaw(t, dir)
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
