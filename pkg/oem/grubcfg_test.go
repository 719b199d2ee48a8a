package oem

import (
	"errors"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

const qemuGrubCfg = "# Flatcar GRUB settings\n\nset oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n"

func TestSettingsLastAssignmentWinsAndExpands(t *testing.T) {
	cfg := ParseGrubConfig([]byte(`set oem_id="qemu"
set linux_console="console=ttyS0,115200n8"
# comment with set oem_id="nope"
set oem_id='openstack'
set linux_append="$linux_append a=1"
set linux_append="${linux_append} b=2"
`))
	got := cfg.Settings()
	want := Settings{OEMID: "openstack", LinuxAppend: " a=1 b=2", LinuxConsole: "console=ttyS0,115200n8"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestPlanRetargetsQemuConfig(t *testing.T) {
	next := Plan([]byte(qemuGrubCfg), SetOptions{ID: "openstack"}, nil)
	want := "# Flatcar GRUB settings\n\nset oem_id=\"openstack\"\nset linux_append=\"\"\n"
	if string(next) != want {
		t.Fatalf("got %q, want %q", next, want)
	}
	// Idempotent: a second plan changes nothing.
	if again := Plan(next, SetOptions{ID: "openstack"}, nil); string(again) != string(next) {
		t.Fatalf("second run changed the file: %q", again)
	}
}

func TestPlanAppendsWithoutDuplicatesAndKeepsAutologinOnRequest(t *testing.T) {
	next := Plan([]byte(qemuGrubCfg), SetOptions{ID: "openstack", KeepAutologin: true}, []string{"flatcar.autologin", "console=ttyS0", "console=ttyS0"})
	s := ParseGrubConfig(next).Settings()
	if s.LinuxAppend != "flatcar.autologin console=ttyS0" {
		t.Fatalf("linux_append = %q", s.LinuxAppend)
	}
}

func TestPlanCreatesConfigWhenMissing(t *testing.T) {
	next := Plan(nil, SetOptions{ID: "openstack"}, []string{"a=b"})
	if string(next) != "set oem_id=\"openstack\"\nset linux_append=\"a=b\"\n" {
		t.Fatalf("got %q", next)
	}
}

func TestPlanAppendsWhenLastAssignmentIsInsideABlock(t *testing.T) {
	in := "set oem_id=\"qemu\"\nif [ x = x ]; then\n  set oem_id=\"vmware\"\nfi\n"
	next := string(Plan([]byte(in), SetOptions{ID: "openstack"}, nil))
	if !strings.HasPrefix(next, in) || !strings.HasSuffix(next, "fi\nset oem_id=\"openstack\"\n") {
		t.Fatalf("got %q", next)
	}
	if ParseGrubConfig([]byte(next)).Settings().OEMID != "openstack" {
		t.Fatal("effective oem_id is not openstack")
	}
}

func TestValidationRejectsGrubScriptInjection(t *testing.T) {
	for _, id := range []string{`open"stack`, "open$stack", `open\stack`, "open;stack", "open\nstack", "OpenStack", "-x", ""} {
		if err := ValidateID(id, true); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("id %q accepted", id)
		}
	}
	for _, args := range []string{`a="b"`, "a=$b", `a\b`, "a;reboot", "a\nb", "a`b`", "a=(b)"} {
		if _, err := ParseKernelArgs(args); err == nil {
			t.Errorf("kernel args %q accepted", args)
		}
	}
	if _, err := ParseKernelArgs("console=ttyS0,115200n8 ignition.config.url=http://x/y:z@w+1"); err != nil {
		t.Fatalf("valid args rejected: %v", err)
	}
	if err := ValidateID("nosuchcloud", false); err == nil || !strings.Contains(err.Error(), "openstack") {
		t.Fatalf("unknown id error does not list the known ids: %v", err)
	}
	if err := ValidateID("nosuchcloud", true); err != nil {
		t.Fatalf("--allow-unknown-id ignored: %v", err)
	}
}
