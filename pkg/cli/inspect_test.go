package cli_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A zeroed primary GPT header: inspect still reads the partitions (from the backup header) and
// says so with a warning instead of falling back silently.
func TestInspectWarnsWhenTheGPTCameFromTheBackup(t *testing.T) {
	img := flatcardisk.Build(t, flatcardisk.Options{FirstBoot: true, GrubCfg: "set oem_id=\"qemu\"\n"})
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(make([]byte, 512), 512)
	f.Close()
	r := testutil.Run(t, "inspect", img, "--for", "qemu").MustSucceed(t)
	if out := r.Combined(); !strings.Contains(out, "WARNING") || !strings.Contains(out, "primary GPT header is damaged") || !strings.Contains(out, "OEM") {
		t.Fatalf("inspect on an image with a zeroed primary GPT header:\n%s", out)
	}
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
