package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/qemuboot"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// oemVariants are the OEM filesystems Flatcar has shipped, as the fixtures build them.
func oemVariants(t *testing.T) []flatcardisk.OEMKind {
	kinds := []flatcardisk.OEMKind{flatcardisk.OEMBtrfs, flatcardisk.OEMBtrfsDup, flatcardisk.OEMExt4}
	if testutil.HaveRoot(t, "variant btrfs-kernel-zlib (loop mount with compress=zlib)") {
		kinds = append(kinds, flatcardisk.OEMBtrfsKernelZlib)
	}
	return kinds
}

// regions hashes the image outside and inside the OEM partition.
func regions(t *testing.T, path string) (outside, inside [32]byte) {
	t.Helper()
	start, size, err := flatcardisk.OEMPartition(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	ho, hi := sha256.New(), sha256.New()
	io.Copy(ho, io.NewSectionReader(f, 0, start))
	io.Copy(ho, io.NewSectionReader(f, start+size, st.Size()-start-size))
	io.Copy(hi, io.NewSectionReader(f, start, size))
	copy(outside[:], ho.Sum(nil))
	copy(inside[:], hi.Sum(nil))
	return
}

func checkFilesystem(t *testing.T, kind flatcardisk.OEMKind, image string) {
	t.Helper()
	part := flatcardisk.ExtractPartition(t, image, "OEM")
	var cmd *exec.Cmd
	if kind == flatcardisk.OEMExt4 {
		cmd = exec.Command("e2fsck", "-fn", part)
	} else {
		cmd = exec.Command("btrfs", "check", "--readonly", part)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s on the OEM partition after oem set: %v\n%s", cmd.Args[0], err, out)
	}
}

// grubRead reads a file of the OEM partition through GRUB's own filesystem drivers.
func grubRead(t *testing.T, image, name string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "grub-read")
	cmd := exec.Command("grub-fstest", image, "cp", "(loop0,gpt6)/"+name, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("grub-fstest cp %s: %v\n%s", name, err, b)
	}
	b, _ := os.ReadFile(out)
	return b
}

func TestOEMSetOnEveryFilesystem(t *testing.T) {
	testutil.RequireTools(t, "btrfs", "e2fsck", "grub-fstest", "mkfs.btrfs", "mkfs.ext4")
	for _, kind := range oemVariants(t) {
		t.Run(string(kind), func(t *testing.T) {
			opts := flatcardisk.Options{OEM: kind}
			img := flatcardisk.Build(t, opts)
			outside, _ := regions(t, img)

			r := testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
			if !strings.Contains(r.Stdout, "grub.cfg updated") {
				t.Fatalf("unexpected report:\n%s", r.Stdout)
			}
			checkFilesystem(t, kind, img)
			cfg := string(grubRead(t, img, "grub.cfg"))
			if !strings.Contains(cfg, `set oem_id="openstack"`) || strings.Contains(cfg, "flatcar.autologin") {
				t.Fatalf("GRUB reads this grub.cfg:\n%s", cfg)
			}
			if !strings.Contains(cfg, "# Flatcar GRUB settings") {
				t.Fatalf("the comment line was lost:\n%s", cfg)
			}
			for name, want := range flatcardisk.OEMFiles(opts) {
				if name == "grub.cfg" {
					continue
				}
				if got := grubRead(t, img, name); !bytes.Equal(got, want) {
					t.Fatalf("%s changed: %d bytes, want %d", name, len(got), len(want))
				}
			}
			if o, _ := regions(t, img); o != outside {
				t.Fatal("bytes outside the OEM partition changed")
			}

			// Idempotent: a second run reports no change and leaves every byte alone.
			before := testutil.SHA256File(t, img)
			r = testutil.Run(t, "oem", "set", img, "--id", "openstack", "-o", "json").MustSucceed(t)
			var res struct{ Changed bool }
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res.Changed {
				t.Fatalf("second run: changed=%v err=%v\n%s", res.Changed, err, r.Stdout)
			}
			if testutil.SHA256File(t, img) != before {
				t.Fatal("second run modified the image")
			}

			// show reads back what GRUB would use.
			r = testutil.Run(t, "oem", "show", img, "-o", "json").MustSucceed(t)
			var st struct {
				Filesystem string
				Settings   struct {
					OEMID       string `json:"oem_id"`
					LinuxAppend string `json:"linux_append"`
				}
				OEMReleaseID string
			}
			json.Unmarshal([]byte(r.Stdout), &st)
			wantFS := "btrfs"
			if kind == flatcardisk.OEMExt4 {
				wantFS = "ext4"
			}
			if st.Filesystem != wantFS || st.Settings.OEMID != "openstack" || st.Settings.LinuxAppend != "" || st.OEMReleaseID != "qemu" {
				t.Fatalf("oem show: %+v", st)
			}
		})
	}
}

func TestOEMSetLinuxAppendAndKeepAutologin(t *testing.T) {
	testutil.RequireTools(t, "grub-fstest", "mkfs.btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--keep-autologin", "--linux-append", "console=ttyS0,115200n8 flatcar.autologin").MustSucceed(t)
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--keep-autologin", "--linux-append", "console=ttyS0,115200n8").MustSucceed(t)
	cfg := string(grubRead(t, img, "grub.cfg"))
	if !strings.Contains(cfg, `set linux_append="flatcar.autologin console=ttyS0,115200n8"`) {
		t.Fatalf("grub.cfg:\n%s", cfg)
	}
}

func TestOEMSetCreatesMissingGrubCfg(t *testing.T) {
	testutil.RequireTools(t, "grub-fstest", "btrfs", "e2fsck")
	for _, kind := range []flatcardisk.OEMKind{flatcardisk.OEMBtrfs, flatcardisk.OEMExt4} {
		t.Run(string(kind), func(t *testing.T) {
			img := flatcardisk.Build(t, flatcardisk.Options{OEM: kind, NoGrubCfg: true})
			r := testutil.Run(t, "oem", "show", img).MustSucceed(t)
			if !strings.Contains(r.Stdout, "grub.cfg:       missing") {
				t.Fatalf("show does not say grub.cfg is missing:\n%s", r.Stdout)
			}
			r = testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
			if !strings.Contains(r.Stdout, "grub.cfg created") {
				t.Fatalf("report:\n%s", r.Stdout)
			}
			checkFilesystem(t, kind, img)
			if cfg := string(grubRead(t, img, "grub.cfg")); !strings.Contains(cfg, `set oem_id="openstack"`) {
				t.Fatalf("grub.cfg:\n%s", cfg)
			}
		})
	}
}

func TestOEMSetOutputFileLeavesInputAlone(t *testing.T) {
	testutil.RequireTools(t, "grub-fstest", "btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	before := testutil.SHA256File(t, img)
	out := filepath.Join(t.TempDir(), "openstack.raw")
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--output-file", out).MustSucceed(t)
	if testutil.SHA256File(t, img) != before {
		t.Fatal("--output-file modified the input image")
	}
	if cfg := string(grubRead(t, out, "grub.cfg")); !strings.Contains(cfg, `set oem_id="openstack"`) {
		t.Fatalf("output grub.cfg:\n%s", cfg)
	}
	checkFilesystem(t, flatcardisk.OEMBtrfs, out)
	si, _ := os.Stat(img)
	so, _ := os.Stat(out)
	if si.Size() != so.Size() {
		t.Fatalf("output size %d, input %d", so.Size(), si.Size())
	}
	if testutil.AllocatedBytes(t, out) > testutil.AllocatedBytes(t, img)+1<<20 {
		t.Fatalf("output is not sparse: %d bytes allocated vs input %d", testutil.AllocatedBytes(t, out), testutil.AllocatedBytes(t, img))
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Fatalf("temporary files left next to the output: %v", entries)
	}
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--output-file", img).MustFail(t, 2, "IMAGE itself")
}

// Every bad input: a clear message, the right exit code, and the image byte-identical afterwards.
func TestOEMSetBadInputs(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs", "mkfs.ext4")
	dir := t.TempDir()
	good := flatcardisk.Build(t, flatcardisk.Options{})

	notDisk := filepath.Join(dir, "notes.txt")
	os.WriteFile(notDisk, []byte("this is not a disk image\n"), 0o644)

	noOEM := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMNone})

	unknownFS := flatcardisk.Build(t, flatcardisk.Options{})
	zeroRange(t, unknownFS, 0, 1<<20) // wipe the btrfs superblock area at 64 KiB... and more

	corruptBtrfs := flatcardisk.Build(t, flatcardisk.Options{})
	flipByte(t, corruptBtrfs, 0x10000+0x100) // inside the superblock: checksum no longer matches

	corruptExt4 := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMExt4})
	flipByte(t, corruptExt4, 0x400+0x20) // s_blocks_per_group: metadata_csum catches it

	cases := []struct {
		name  string
		image string
		args  []string
		code  int
		want  []string
	}{
		{"missing file", filepath.Join(dir, "nope.raw"), nil, 1, []string{"does not exist"}},
		{"not a disk image", notDisk, nil, 2, []string{"no GPT", "Flatcar"}}, // invalid input (issue 44)
		{"GPT without OEM", noOEM, nil, 1, []string{`no partition named "OEM"`}},
		{"unknown filesystem", unknownFS, nil, 1, []string{"unknown filesystem"}},
		{"corrupt btrfs superblock", corruptBtrfs, nil, 1, []string{"checksum"}},
		{"corrupt ext4 superblock", corruptExt4, nil, 1, []string{"ext4"}},
		{"quote injection", good, []string{"--id", `openstack"`}, 2, []string{"invalid OEM id"}},
		{"dollar injection", good, []string{"--id", "$(reboot)"}, 2, []string{"invalid OEM id"}},
		{"newline injection", good, []string{"--id", "openstack\nset linux_append=x"}, 2, []string{"invalid OEM id"}},
		{"semicolon in args", good, []string{"--id", "openstack", "--linux-append", "a;reboot"}, 2, []string{"invalid kernel argument"}},
		{"backslash in args", good, []string{"--id", "openstack", "--linux-append", `a\"b`}, 2, []string{"invalid kernel argument"}},
		{"quote in args", good, []string{"--id", "openstack", "--linux-append", `x" linux /evil "`}, 2, []string{"invalid kernel argument"}},
		{"unknown id", good, []string{"--id", "openstak"}, 2, []string{"unknown OEM id", "openstack", "--allow-unknown-id"}},
		{"missing --id", good, []string{}, 2, []string{"--id is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before string
			exists := fileExists(c.image)
			if exists {
				before = testutil.SHA256File(t, c.image)
			}
			args := c.args
			if args == nil {
				args = []string{"--id", "openstack"}
			}
			testutil.Run(t, append([]string{"oem", "set", c.image}, args...)...).MustFail(t, c.code, c.want...)
			if exists && testutil.SHA256File(t, c.image) != before {
				t.Fatal("the image changed although the command failed")
			}
		})
	}
	// --allow-unknown-id lets a platform this list lacks through.
	testutil.Run(t, "oem", "set", good, "--id", "mycloud", "--allow-unknown-id").MustSucceed(t)
}

func TestOEMSetReadOnlyImage(t *testing.T) {
	testutil.RequireRoot(t, "dropping privileges with setpriv")
	testutil.RequireTools(t, "setpriv", "mkfs.btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	// Let nobody reach the file: t.TempDir() and its parent are 0700.
	for dir := filepath.Dir(img); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755)
	}
	os.Chmod(img, 0o444)
	before := testutil.SHA256File(t, img)
	testutil.RunCmd(t, testutil.Cmd{Prefix: testutil.AsNobody, Args: []string{"oem", "set", img, "--id", "openstack"}}).
		MustFail(t, 1, "not writable", "--output-file")
	// Read-only commands still work for that user.
	testutil.RunCmd(t, testutil.Cmd{Prefix: testutil.AsNobody, Args: []string{"oem", "show", img}}).MustSucceed(t)
	if testutil.SHA256File(t, img) != before {
		t.Fatal("read-only image changed")
	}
}

func TestOEMShowAndInspectBadInputs(t *testing.T) {
	dir := t.TempDir()
	notDisk := filepath.Join(dir, "zero.raw")
	os.WriteFile(notDisk, make([]byte, 1<<20), 0o644)
	testutil.Run(t, "oem", "show", filepath.Join(dir, "nope")).MustFail(t, 1, "does not exist")
	testutil.Run(t, "inspect", notDisk).MustFail(t, 2, "no GPT")
	testutil.Run(t, "inspect").MustFail(t, 2, "IMAGE")
	testutil.Run(t, "inspect", notDisk, "--for", "Bad;Id").MustFail(t, 2, "invalid OEM id")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func flipByte(t *testing.T, image string, offInOEM int64) {
	t.Helper()
	start, _, err := flatcardisk.OEMPartition(image)
	if err != nil {
		t.Fatal(err)
	}
	testutil.FlipByte(t, image, start+offInOEM)
}

func zeroRange(t *testing.T, image string, offInOEM, n int64) {
	t.Helper()
	start, _, _ := flatcardisk.OEMPartition(image)
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteAt(make([]byte, n), start+offInOEM)
}

// A downloaded Flatcar .img is a compressed qcow2: oem set retargets it in one command.
func TestOEMSetOnQcow2(t *testing.T) {
	testutil.RequireTools(t, "qemu-img", "mkfs.btrfs", "grub-fstest")
	raw := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	img := filepath.Join(dir, "flatcar_production_qemu_image.img")
	testutil.QemuImg(t, "convert", "-c", "-O", "qcow2", "-o", "compat=0.10", raw, img)
	before := testutil.SHA256File(t, img)

	testutil.Run(t, "oem", "set", img, "--id", "openstack").MustFail(t, 1, "qcow2", "--output-file")

	for _, out := range []string{"flatcar-openstack.qcow2", "flatcar-openstack.raw"} {
		t.Run(out, func(t *testing.T) {
			dst := filepath.Join(dir, out)
			testutil.Run(t, "oem", "set", img, "--id", "openstack", "--output-file", dst).MustSucceed(t)
			r := testutil.Run(t, "oem", "show", dst, "-o", "json").MustSucceed(t)
			var st struct {
				Settings struct {
					OEMID       string `json:"oem_id"`
					LinuxAppend string `json:"linux_append"`
				}
			}
			json.Unmarshal([]byte(r.Stdout), &st)
			if st.Settings.OEMID != "openstack" || st.Settings.LinuxAppend != "" {
				t.Fatalf("oem show %s: %s", out, r.Stdout)
			}
			info, _ := exec.Command("qemu-img", "info", "--output=json", dst).Output()
			wantFormat := strings.TrimPrefix(filepath.Ext(out), ".")
			if !strings.Contains(string(info), `"format": "`+wantFormat+`"`) {
				t.Fatalf("qemu-img info says:\n%s", info)
			}
			if wantFormat == "qcow2" {
				testutil.QemuImg(t, "check", dst)
			}
			testutil.Run(t, "inspect", dst, "--for", "openstack").MustSucceed(t)
		})
	}
	if testutil.SHA256File(t, img) != before {
		t.Fatal("the qcow2 input changed")
	}
	// Only the input and the two outputs: no work files left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	testutil.Run(t, "oem", "set", raw, "--id", "openstack", "--output-file", filepath.Join(dir, "x.raw"), "--compress").MustFail(t, 2, "--compress needs qcow2")
}

// randomArgs makes n bytes of kernel arguments that zlib cannot shrink much (base64-like words).
func randomArgs(r *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var b strings.Builder
	for b.Len()+50 <= n { // a word is at most 49 bytes with its space
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "k%d=", r.Intn(1e6))
		for range 40 {
			b.WriteByte(alphabet[r.Intn(len(alphabet))])
		}
	}
	return b.String()
}

// A grub.cfg grown past what btrfs can hold inline is refused with a message that says so and
// what to do, not "unsupported btrfs layout"; the image is left as it was (btrfs check clean).
func TestOEMSetBtrfsGrubCfgTooLargeSaysWhatToDo(t *testing.T) {
	testutil.RequireTools(t, "btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{OEM: flatcardisk.OEMBtrfs})
	r := rand.New(rand.NewSource(1))
	// Each run may add up to 1024 bytes of arguments, and they accumulate: a few runs overflow.
	for run := 1; run <= 8; run++ {
		before := testutil.SHA256File(t, img)
		res := testutil.Run(t, "oem", "set", img, "--id", "openstack", "--linux-append", randomArgs(r, 1000))
		if res.Code == 0 {
			continue
		}
		res.MustFail(t, 1, "does not fit in the btrfs OEM partition", "grub.cfg", "Shorten --linux-append", "Nothing was written")
		if strings.Contains(res.Stderr, "unsupported btrfs layout") {
			t.Fatalf("the message still blames the layout:\n%s", res.Stderr)
		}
		if testutil.SHA256File(t, img) != before {
			t.Fatal("the refused edit changed the image")
		}
		checkFilesystem(t, flatcardisk.OEMBtrfs, img)
		t.Logf("refused on run %d: %s", run, res.Stderr)
		return
	}
	t.Fatal("8 runs of 1000 bytes of kernel arguments each all fitted in an inline grub.cfg")
}

// The proof that matters: real GRUB boots the patched image and the kernel command line carries
// flatcar.oem.id=openstack (and no autologin); an unpatched image shows flatcar.oem.id=qemu.
func TestBootPatchedImages(t *testing.T) {
	testutil.SkipLong(t, "boot tests take ~15 s each under QEMU TCG")
	testutil.RequireTools(t, "qemu-system-x86_64", "grub-mkimage", "mkfs.btrfs")
	for _, kind := range []flatcardisk.OEMKind{flatcardisk.OEMBtrfs, flatcardisk.OEMExt4} {
		t.Run(string(kind), func(t *testing.T) {
			img := flatcardisk.Build(t, flatcardisk.Options{OEM: kind, Bootable: true, FirstBoot: true})
			testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
			cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
			if !hasArg(cmdline, "flatcar.oem.id=openstack") || hasArg(cmdline, "flatcar.autologin") {
				t.Fatalf("guest /proc/cmdline after oem set: %q", cmdline)
			}
		})
	}
	t.Run("btrfs UEFI", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, FirstBoot: true})
		testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{UEFI: true})
		if !hasArg(cmdline, "flatcar.oem.id=openstack") || hasArg(cmdline, "flatcar.autologin") {
			t.Fatalf("guest /proc/cmdline after oem set, UEFI: %q", cmdline)
		}
	})
	t.Run("unpatched", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, FirstBoot: true})
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
		if !hasArg(cmdline, "flatcar.oem.id=qemu") || !hasArg(cmdline, "flatcar.autologin") {
			t.Fatalf("unpatched guest /proc/cmdline: %q", cmdline)
		}
	})
	t.Run("hybrid MBR replaced by protective", func(t *testing.T) {
		img := flatcardisk.Build(t, flatcardisk.Options{Bootable: true, HybridMBR: true, FirstBoot: true})
		testutil.Run(t, "oem", "set", img, "--id", "openstack", "--protective-mbr", "--linux-append", "flatcar.capo.test=1").MustSucceed(t)
		cmdline := qemuboot.Boot(t, img, qemuboot.Options{})
		if !hasArg(cmdline, "flatcar.oem.id=openstack") || !hasArg(cmdline, "flatcar.capo.test=1") {
			t.Fatalf("guest /proc/cmdline after --protective-mbr: %q", cmdline)
		}
	})
}

func hasArg(cmdline, arg string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == arg {
			return true
		}
	}
	return false
}
