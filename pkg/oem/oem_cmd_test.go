package oem_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
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

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
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
			before := fileHash(t, img)
			r = testutil.Run(t, "oem", "set", img, "--id", "openstack", "-o", "json").MustSucceed(t)
			var res struct{ Changed bool }
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res.Changed {
				t.Fatalf("second run: changed=%v err=%v\n%s", res.Changed, err, r.Stdout)
			}
			if fileHash(t, img) != before {
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
	before := fileHash(t, img)
	out := filepath.Join(t.TempDir(), "openstack.raw")
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--output-file", out).MustSucceed(t)
	if fileHash(t, img) != before {
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
	if du(t, out) > du(t, img)+1<<20 {
		t.Fatalf("output is not sparse: %d bytes allocated vs input %d", du(t, out), du(t, img))
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Fatalf("temporary files left next to the output: %v", entries)
	}
	testutil.Run(t, "oem", "set", img, "--id", "openstack", "--output-file", img).MustFail(t, 2, "IMAGE itself")
}

func TestInspectVerdicts(t *testing.T) {
	testutil.RequireTools(t, "mkfs.btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	r := testutil.Run(t, "inspect", img, "--for", "openstack").MustFail(t, 1, "NOT READY", "oem set")
	if !strings.Contains(r.Stdout, "OEM") || !strings.Contains(r.Stdout, "oem-qemu-") {
		t.Fatalf("inspect lacks partitions or sysext:\n%s", r.Stdout)
	}
	// The qemu image is fine for qemu itself (only a warning for autologin).
	r = testutil.Run(t, "inspect", img, "-o", "json").MustSucceed(t)
	var rep struct {
		Verdict    string
		Target     string
		FirstBoot  *bool
		Partitions []struct {
			Number     int
			Name, Type string
		}
		Findings []struct{ Level, Code string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != "WARNING" || rep.Target != "qemu" || rep.FirstBoot == nil || !*rep.FirstBoot || len(rep.Partitions) != 7 || !hasCode(rep.Findings, "autologin") {
		t.Fatalf("inspect json: %+v", rep)
	}
	testutil.Run(t, "oem", "set", img, "--id", "openstack").MustSucceed(t)
	r = testutil.Run(t, "inspect", img, "--for", "openstack", "-o", "json").MustSucceed(t)
	json.Unmarshal([]byte(r.Stdout), &rep)
	// The qemu sysext stays (harmless, FACTS): info, so READY.
	if rep.Verdict != "READY" || !hasCode(rep.Findings, "oem-release-differs") || hasCode(rep.Findings, "autologin") {
		t.Fatalf("after oem set: %+v", rep)
	}

	leftover := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, GrubCfg: "set oem_id=\"openstack\"\n", ExtraOEMFiles: map[string][]byte{"config.ign": []byte(`{"ignition":{"version":"2.3.0"}}`)}})
	testutil.Run(t, "inspect", leftover, "--for", "openstack").MustFail(t, 1, "config.ign")

	noFirstBoot := flatcardisk.Build(t, flatcardisk.Options{GrubCfg: "set oem_id=\"openstack\"\n"})
	r = testutil.Run(t, "inspect", noFirstBoot, "-o", "json").MustSucceed(t)
	json.Unmarshal([]byte(r.Stdout), &rep)
	if !hasCode(rep.Findings, "first-boot-missing") {
		t.Fatalf("missing first_boot not reported: %+v", rep)
	}

	hybrid := flatcardisk.Build(t, flatcardisk.Options{HybridMBR: true, FirstBoot: true})
	r = testutil.Run(t, "inspect", hybrid, "-o", "json").MustSucceed(t)
	json.Unmarshal([]byte(r.Stdout), &rep)
	if !hasCode(rep.Findings, "hybrid-mbr") {
		t.Fatalf("hybrid MBR not reported: %+v", rep)
	}
	testutil.Run(t, "oem", "set", hybrid, "--id", "openstack", "--protective-mbr").MustSucceed(t)
	r = testutil.Run(t, "inspect", hybrid, "-o", "json").MustSucceed(t)
	json.Unmarshal([]byte(r.Stdout), &rep)
	if hasCode(rep.Findings, "hybrid-mbr") {
		t.Fatalf("hybrid MBR still reported after --protective-mbr: %+v", rep)
	}
}

func hasCode(fs []struct{ Level, Code string }, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}
