package oem_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// A downloaded Flatcar .img is a compressed qcow2: oem set retargets it in one command.
func TestOEMSetOnQcow2(t *testing.T) {
	testutil.RequireTools(t, "qemu-img", "mkfs.btrfs", "grub-fstest")
	raw := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true})
	dir := t.TempDir()
	img := filepath.Join(dir, "flatcar_production_qemu_image.img")
	if out, err := exec.Command("qemu-img", "convert", "-c", "-O", "qcow2", "-o", "compat=0.10", raw, img).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	before := fileHash(t, img)

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
				if o, err := exec.Command("qemu-img", "check", dst).CombinedOutput(); err != nil {
					t.Fatalf("qemu-img check: %v\n%s", err, o)
				}
			}
			testutil.Run(t, "inspect", dst, "--for", "openstack").MustSucceed(t)
		})
	}
	if fileHash(t, img) != before {
		t.Fatal("the qcow2 input changed")
	}
	// Only the input and the two outputs: no work files left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	testutil.Run(t, "oem", "set", raw, "--id", "openstack", "--output-file", filepath.Join(dir, "x.raw"), "--compress").MustFail(t, 2, "--compress needs qcow2")
}
