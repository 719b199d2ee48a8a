package oem

import (
	"errors"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

const qemuGrubCfg = "# Flatcar GRUB settings\n\nset oem_id=\"qemu\"\nset linux_append=\"flatcar.autologin\"\n"

func TestSettingsLastAssignmentWinsAndExpands(t *testing.T) {
	cfg := parseGrubConfig([]byte(`set oem_id="qemu"
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
	next := plan([]byte(qemuGrubCfg), SetOptions{ID: "openstack"}, nil)
	want := "# Flatcar GRUB settings\n\nset oem_id=\"openstack\"\nset linux_append=\"\"\n"
	if string(next) != want {
		t.Fatalf("got %q, want %q", next, want)
	}
	// Idempotent: a second plan changes nothing.
	if again := plan(next, SetOptions{ID: "openstack"}, nil); string(again) != string(next) {
		t.Fatalf("second run changed the file: %q", again)
	}
}

func TestPlanAppendsWithoutDuplicatesAndKeepsAutologinOnRequest(t *testing.T) {
	next := plan([]byte(qemuGrubCfg), SetOptions{ID: "openstack", KeepAutologin: true}, []string{"flatcar.autologin", "console=ttyS0", "console=ttyS0"})
	s := parseGrubConfig(next).Settings()
	if s.LinuxAppend != "flatcar.autologin console=ttyS0" {
		t.Fatalf("linux_append = %q", s.LinuxAppend)
	}
}

func TestPlanCreatesConfigWhenMissing(t *testing.T) {
	next := plan(nil, SetOptions{ID: "openstack"}, []string{"a=b"})
	if string(next) != "set oem_id=\"openstack\"\nset linux_append=\"a=b\"\n" {
		t.Fatalf("got %q", next)
	}
}

func TestPlanAppendsWhenLastAssignmentIsInsideABlock(t *testing.T) {
	in := "set oem_id=\"qemu\"\nif [ x = x ]; then\n  set oem_id=\"vmware\"\nfi\n"
	next := string(plan([]byte(in), SetOptions{ID: "openstack"}, nil))
	if !strings.HasPrefix(next, in) || !strings.HasSuffix(next, "fi\nset oem_id=\"openstack\"\n") {
		t.Fatalf("got %q", next)
	}
	if parseGrubConfig([]byte(next)).Settings().OEMID != "openstack" {
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

// Crafted grub.cfg files are refused quickly by the bounds; Flatcar's few lines are not.
func TestCheckGrubConfigBounds(t *testing.T) {
	doubling := strings.Repeat(`set linux_append="$linux_append$linux_append"`+"\n", 40)
	cases := map[string]struct {
		cfg  string
		want string // "" = accepted
	}{
		"flatcar's":           {qemuGrubCfg, ""},
		"doubling 40 times":   {`set linux_append="x"` + "\n" + doubling, "would expand to more than"},
		"100k self-appending": {strings.Repeat(`set linux_append="$linux_append a"`+"\n", 100000), "more than the 65536"},
		"many short lines":    {strings.Repeat("set a=b\n", maxGrubCfgLines+1), "lines, more than"},
		"a long literal":      {`set linux_append="` + strings.Repeat("a", maxGrubValue+1) + `"`, "would expand to more than"},
		"at the value bound":  {`set linux_append="` + strings.Repeat("a", maxGrubValue) + `"`, ""},
	}
	for name, c := range cases {
		start := time.Now()
		err := checkGrubConfig([]byte(c.cfg))
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: took %v", name, took)
		}
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		// Settings stays bounded even without the check.
		if s := parseGrubConfig([]byte(c.cfg)).Settings(); len(s.LinuxAppend) > maxGrubValue {
			t.Errorf("%s: Settings gave a %d-byte linux_append", name, len(s.LinuxAppend))
		}
	}
}

// FuzzGrubConfig evaluates any file within a bound: no panic, every value at most MaxGrubValue,
// CheckGrubConfig and Settings agree, and an accepted file re-renders byte for byte.
func FuzzGrubConfig(f *testing.F) {
	f.Add([]byte(qemuGrubCfg))
	f.Add([]byte(`set linux_append="$linux_append$linux_append"` + "\n" + `set x='${linux_append}'` + "\n"))
	f.Add([]byte("if true; then\nset oem_id=\"a\"\nfi\nset b=\\$c\"d\"\n"))
	allocated := func() uint64 {
		m := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		metrics.Read(m)
		return m[0].Value.Uint64()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := allocated()
		err := checkGrubConfig(data)
		g := parseGrubConfig(data)
		s := g.Settings()
		// The memory limit: at most MaxGrubCfgLines values of 2*MaxGrubValue each, twice over.
		if n := allocated() - before; n > 4*maxGrubCfgLines*maxGrubValue+uint64(64*len(data)) {
			t.Fatalf("evaluating %d bytes allocated %d bytes", len(data), n)
		}
		for _, v := range []string{s.OEMID, s.LinuxAppend, s.LinuxConsole} {
			if len(v) > maxGrubValue {
				t.Fatalf("a %d-byte value", len(v))
			}
		}
		if err != nil {
			return
		}
		if len(data) > maxGrubCfgBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		if got := g.Bytes(); len(g.lines) > 0 && data[len(data)-1] == '\n' && string(got) != string(data) {
			t.Fatalf("re-rendered %q as %q", data, got)
		}
		g.Set(varOEMID, "openstack")
		if got := g.Settings().OEMID; got != "openstack" {
			t.Fatalf("after Set, oem_id is %q", got)
		}
	})
}
