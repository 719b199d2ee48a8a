package sbom

import (
	"bytes"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func sample() Inventory {
	return Inventory{Tool: "v0.9.0",
		Subject: Subject{File: "flatcar.qcow2", SHA512: strings.Repeat("ab", 64), Name: "flatcar-stable", Method: "sysext"},
		Flatcar: Flatcar{Channel: "stable", Version: "4459.2.0", Arch: "amd64", File: "flatcar_production_openstack_image.img",
			URL: "https://stable.release.flatcar-linux.net/amd64-usr/4459.2.0/flatcar_production_openstack_image.img", SHA512: strings.Repeat("cd", 64), Verified: true},
		Files:   []File{{Name: "kubeadm", Version: "v1.33.4", SHA256: strings.Repeat("ef", 32), URL: "https://dl.k8s.io/release/v1.33.4/bin/linux/amd64/kubeadm"}},
		Sysexts: []Sysext{{File: "kubernetes-v1.33.4-x86-64.raw", Version: "v1.33.4", SHA512: strings.Repeat("01", 64)}},
		Images: []Image{{Ref: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("23", 32), Platform: "linux/amd64"},
			{Ref: "registry.k8s.io/coredns/coredns:v1.12.0", Digest: "sha256:" + strings.Repeat("45", 32), Platform: "linux/amd64"}},
	}
}

// Package URLs as the purl spec writes them: oci with the digest as version (':' encoded) and
// repository_url/tag/arch qualifiers in key order; generic with download_url.
func TestPackageURLs(t *testing.T) {
	bom := sample().BOM()
	got := map[string]string{}
	for _, c := range *bom.Components {
		got[c.BOMRef] = c.PackageURL
	}
	want := map[string]string{
		"image:registry.k8s.io/pause:3.10@sha256:" + strings.Repeat("23", 32): "pkg:oci/pause@sha256%3A" + strings.Repeat("23", 32) +
			"?arch=amd64&repository_url=registry.k8s.io/pause&tag=3.10",
		"image:registry.k8s.io/coredns/coredns:v1.12.0@sha256:" + strings.Repeat("45", 32): "pkg:oci/coredns@sha256%3A" + strings.Repeat("45", 32) +
			"?arch=amd64&repository_url=registry.k8s.io/coredns/coredns&tag=v1.12.0",
		"file:kubeadm": "pkg:generic/kubeadm@v1.33.4?download_url=https://dl.k8s.io/release/v1.33.4/bin/linux/amd64/kubeadm",
	}
	for ref, w := range want {
		if got[ref] != w {
			t.Errorf("%s: purl %q, want %q", ref, got[ref], w)
		}
	}
}

// Same inventory, same bytes; any change, another serial number; a timestamp only when given.
func TestEncodeReproducible(t *testing.T) {
	a, err := sample().Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sample().Encode()
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of one inventory differ")
	}
	if bytes.Contains(a, []byte(`"timestamp"`)) {
		t.Error("a timestamp without one given")
	}
	other := sample()
	other.Images[0].Digest = "sha256:" + strings.Repeat("99", 32)
	c, _ := other.Encode()
	serial := func(b []byte) string {
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatal(err)
		}
		return bom.SerialNumber
	}
	if serial(a) == serial(c) || !strings.HasPrefix(serial(a), "urn:uuid:") {
		t.Errorf("serials %s and %s", serial(a), serial(c))
	}
	timed := sample()
	timed.Time = time.Unix(1700000000, 0)
	d, _ := timed.Encode()
	if !bytes.Contains(d, []byte(`"timestamp": "2023-11-14T22:13:20Z"`)) {
		t.Errorf("timestamp missing:\n%s", d)
	}
}
