package release

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		r    Release
		want string // "" = valid
	}{
		{Release{Channel: "stable", Arch: "amd64", Version: "current"}, ""},
		{Release{Channel: "alpha", Arch: "arm64", Version: "4230.0.0"}, ""},
		{Release{Channel: "lts", Arch: "amd64", Version: "current-2024"}, ""},
		{Release{Channel: "stable", Arch: "amd64", Version: "current-2024"}, "only on the lts channel"},
		{Release{Channel: "edge", Arch: "amd64", Version: "current"}, "valid: stable, beta, alpha, lts"},
		{Release{Channel: "beta", Arch: "x86_64", Version: "current"}, "valid: amd64, arm64"},
		{Release{Channel: "beta", Arch: "amd64", Version: "4230.1"}, "invalid version"},
		{Release{Channel: "beta", Arch: "amd64", Version: "../../etc"}, "invalid version"},
	}
	for _, tc := range tests {
		err := tc.r.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.r, err, tc.want)
		}
	}
}

func TestURLs(t *testing.T) {
	tests := []struct {
		r    Release
		want string
	}{
		{Release{Channel: "stable", Arch: "amd64", Version: "4230.2.3"},
			"https://stable.release.flatcar-linux.net/amd64-usr/4230.2.3/flatcar_production_qemu_image.img"},
		{Release{Channel: "lts", Arch: "arm64", Version: "current-2024"},
			"https://lts.release.flatcar-linux.net/arm64-usr/current-2024/flatcar_production_qemu_image.img"},
		{Release{Server: "http://mirror.example/flatcar/{channel}/", Channel: "beta", Arch: "amd64", Version: "4230.1.0"},
			"http://mirror.example/flatcar/beta/amd64-usr/4230.1.0/flatcar_production_qemu_image.img"},
	}
	for _, tc := range tests {
		if got := tc.r.URL(ImageFile("qemu", CompressionNone)); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
	a := Release{Channel: "beta", Arch: "amd64", Version: "1.2.3"}.Artifact(ImageFile("openstack", CompressionBzip2))
	if a.SignedDigests != "https://beta.release.flatcar-linux.net/amd64-usr/1.2.3/flatcar_production_openstack_image.img.bz2.DIGESTS.asc" ||
		!strings.HasSuffix(a.SignatureURL, ".img.bz2.sig") {
		t.Errorf("artifact %+v", a)
	}
}

func TestParseVersionTxt(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"FLATCAR_BUILD=4230\nFLATCAR_BRANCH=2\nFLATCAR_VERSION=4230.2.3\nFLATCAR_VERSION_ID=4230.2.3\n", "4230.2.3", ""},
		{"# comment\nFLATCAR_VERSION='3510.2.8'\n", "3510.2.8", ""},
		{"FLATCAR_BUILD=1\n", "", "no FLATCAR_VERSION"},
		{"FLATCAR_VERSION=4230.2.3; rm -rf /\n", "", "not a release number"},
	}
	for _, tc := range tests {
		got, err := ParseVersionTxt(strings.NewReader(tc.in))
		if got != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseDigests(t *testing.T) {
	sha := strings.Repeat("ab", 64)
	in := "# MD5 HASH\n0123  f.img\n# SHA1 HASH\n4567  f.img\n# SHA512 HASH\n" + strings.ToUpper(sha) + "  f.img\n" + sha + "  g.img.bz2\n"
	d, err := ParseDigests([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.SHA512("f.img"); err != nil || got != sha {
		t.Fatalf("f.img: %q %v", got, err)
	}
	if d["MD5"]["f.img"] != "0123" {
		t.Fatalf("MD5 section: %v", d["MD5"])
	}
	if _, err := d.SHA512("h.img"); err == nil || !strings.Contains(err.Error(), "no SHA512 for h.img") {
		t.Fatalf("missing file: %v", err)
	}
	for _, bad := range []string{"# SHA512 HASH\nzz  f.img\n", "# SHA512 HASH\nabcd\n"} {
		if _, err := ParseDigests([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	d, _ = ParseDigests([]byte("# SHA512 HASH\nabcd  f.img\n"))
	if _, err := d.SHA512("f.img"); err == nil {
		t.Error("accepted a short SHA512")
	}
}

func FuzzParseDigests(f *testing.F) {
	f.Add([]byte("# SHA512 HASH\nabcd  f.img\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDigests(b)
		if err == nil {
			d.SHA512("f.img")
		}
	})
}

func FuzzParseVersionTxt(f *testing.F) {
	f.Add("FLATCAR_VERSION=4230.2.3\n")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseVersionTxt(strings.NewReader(s)); err == nil && !versionRe.MatchString(v) {
			t.Fatalf("accepted %q", v)
		}
	})
}
