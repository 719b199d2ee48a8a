package packer

import "testing"

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in          string
		want        string
		needsPlugin bool
	}{
		{"Packer v1.6.6\n", "1.6.6", false},
		{"Packer v1.12.0\n\nYour version of Packer is out of date! The latest version\nis 1.14.2.\n", "1.12.0", true},
		{"Packer v1.9.4\n", "1.9.4", false},
		{"Packer v1.10.0-dev (abc)\n", "1.10.0-dev", true},
		{"1.6.6\n", "1.6.6", false},
		{"Packer v2.0.1\n", "2.0.1", true},
	} {
		v, err := parseVersion(c.in)
		if err != nil {
			t.Fatalf("ParseVersion(%q): %v", c.in, err)
		}
		if v.String() != c.want || v.NeedsQEMUPlugin() != c.needsPlugin {
			t.Errorf("ParseVersion(%q) = %s (needs plugin %v), want %s (%v)", c.in, v, v.NeedsQEMUPlugin(), c.want, c.needsPlugin)
		}
	}
	for _, bad := range []string{"", "packer: command not found", "Packer vX.Y"} {
		if v, err := parseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %s, want an error", bad, v)
		}
	}
	if err := (version{1, 5, 6, ""}).Supported(); err == nil {
		t.Error("packer 1.5.6 accepted; it has no iso_checksum = \"none\"")
	}
	if err := (version{1, 6, 6, ""}).Supported(); err != nil {
		t.Errorf("packer 1.6.6 refused: %v", err)
	}
}
