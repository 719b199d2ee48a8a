package sysext

import (
	"strings"
	"testing"
)

// systemd-sysext's rules (extension_release_validate), case by case.
func TestCompatible(t *testing.T) {
	flatcar := FlatcarHost("amd64")
	osrel, err := HostFromOSRelease([]byte("NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\nVERSION_ID=4459.2.0\nSYSEXT_LEVEL=1.0\n"), "amd64", "os-release")
	if err != nil {
		t.Fatal(err)
	}
	debian, _ := HostFromOSRelease([]byte("ID=debian\nVERSION_ID=\"12\"\n"), "", "debian")
	for _, c := range []struct {
		ext  string
		host Host
		ok   bool
		why  string
	}{
		{"ID=_any\nARCHITECTURE=x86-64\n", flatcar, true, "ID=_any matches any OS"},
		{"ID=_any\n", debian, true, "no ARCHITECTURE"},
		{"ID=_any\nARCHITECTURE=arm64\n", flatcar, false, "ARCHITECTURE=arm64, but the host is x86-64"},
		{"ID=_any\nARCHITECTURE=amd64\n", flatcar, false, "not a systemd architecture name"},
		{"ID=_any\nARCHITECTURE=x86-64\n", debian, true, "host architecture not checked"},
		{"ID=flatcar\nSYSEXT_LEVEL=1.0\n", flatcar, true, "SYSEXT_LEVEL=1.0 match"},
		{"ID=flatcar\nSYSEXT_LEVEL=1.0\n", osrel, true, "SYSEXT_LEVEL=1.0 match"},
		{"ID=flatcar\nSYSEXT_LEVEL=2.0\n", flatcar, false, "SYSEXT_LEVEL=2.0, but the host has SYSEXT_LEVEL=1.0"},
		{"ID=flatcar\nVERSION_ID=4459.2.0\n", osrel, true, "VERSION_ID=4459.2.0 match"},
		{"ID=flatcar\nVERSION_ID=4081.2.0\n", osrel, false, "VERSION_ID=4081.2.0, but the host has VERSION_ID=4459.2.0"},
		{"ID=flatcar\nVERSION_ID=4459.2.0\n", flatcar, false, "host's version is unknown"},
		{"ID=flatcar\n", osrel, false, "neither SYSEXT_LEVEL nor VERSION_ID"},
		{"ID=debian\nVERSION_ID=12\n", flatcar, false, "ID=debian, but the host is ID=flatcar"},
		{"ARCHITECTURE=x86-64\n", flatcar, false, "has no ID="},
		{"ID=_any\nSYSEXT_SCOPE=portable\n", flatcar, false, "SYSEXT_SCOPE"},
		{"ID=_any\nSYSEXT_SCOPE=\"initrd system\"\n", flatcar, true, "ID=_any"},
	} {
		r, err := parseRelease([]byte(c.ext))
		if err != nil {
			t.Fatal(err)
		}
		ok, why := compatible(r, c.host)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%q on %s: %v %q, want %v %q", c.ext, c.host.Source, ok, why, c.ok, c.why)
		}
	}
}

func TestParseRelease(t *testing.T) {
	r, err := parseRelease([]byte("# comment\n\nNAME=\"Flatcar \\\"CL\\\"\"\nID=flatcar\nPRETTY='a b'\nEMPTY=\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r["NAME"] != `Flatcar "CL"` || r["ID"] != "flatcar" || r["PRETTY"] != "a b" || r["EMPTY"] != "" {
		t.Errorf("%#v", r)
	}
	for _, bad := range []string{"NOEQUALS\n", "A=\"open\n", "=x\n"} {
		if _, err := parseRelease([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	back, err := parseRelease(r.Format("ID"))
	if err != nil || len(back) != len(r) || back["NAME"] != r["NAME"] {
		t.Errorf("Format round trip: %#v %v", back, err)
	}
	if _, err := HostFromOSRelease([]byte("NAME=x\n"), "", "f"); err == nil {
		t.Error("os-release without ID accepted")
	}
}

func TestArch(t *testing.T) {
	for in, want := range map[string]string{"amd64": "x86-64", "x86_64": "x86-64", "x86-64": "x86-64", "arm64": "arm64", "aarch64": "arm64"} {
		if got, err := Arch(in); got != want || err != nil {
			t.Errorf("Arch(%s) = %s %v", in, got, err)
		}
	}
	if _, err := Arch("i386"); err == nil {
		t.Error("i386 accepted")
	}
	if n, _ := KubernetesFileName("v1.33.4", "amd64"); n != "kubernetes-v1.33.4-x86-64.raw" {
		t.Error(n)
	}
}
