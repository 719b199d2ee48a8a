package configdrive_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
)

func TestWriteReadsBackAndIsAConfigDrive(t *testing.T) {
	dir := t.TempDir()
	iso := filepath.Join(dir, "config-2.iso")
	ign := []byte(`{"ignition":{"version":"3.3.0"}}`)
	if err := configdrive.Write(iso, ign, configdrive.MetaData{UUID: "0b1e7f4e-0000-4000-8000-000000000001", Name: "build", Hostname: "build"}); err != nil {
		t.Fatal(err)
	}
	got, err := configdrive.Read(iso)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(ign) {
		t.Fatalf("user_data %q, want %q", got, ign)
	}
	if fi, _ := os.Stat(iso); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// Real tools read it the way a guest does: the label and the lower-case Rock Ridge names.
	testutil.RequireTools(t, "blkid", "xorriso")
	if out := testutil.MustRun(t, "blkid", "-o", "export", iso); !strings.Contains(out, "LABEL=config-2") || !strings.Contains(out, "TYPE=iso9660") {
		t.Fatalf("blkid:\n%s", out)
	}
	out := testutil.MustRun(t, "xorriso", "-indev", iso, "-find", "/", "-type", "f")
	for _, p := range []string{"'/openstack/latest/user_data'", "'/openstack/latest/meta_data.json'"} {
		if !strings.Contains(out, p) {
			t.Fatalf("xorriso lacks %s:\n%s", p, out)
		}
	}
	x := filepath.Join(dir, "x")
	testutil.MustRun(t, "xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/openstack/latest/meta_data.json", x)
	if b, _ := os.ReadFile(x); !strings.Contains(string(b), `"uuid":"0b1e7f4e-0000-4000-8000-000000000001"`) {
		t.Fatalf("meta_data.json %s", b)
	}
}

func TestReadRejectsOtherLabels(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "x.iso")
	os.WriteFile(bad, make([]byte, 1<<20), 0o600)
	if _, err := configdrive.Read(bad); err == nil {
		t.Fatal("a zero file was read as a config drive")
	}
}
