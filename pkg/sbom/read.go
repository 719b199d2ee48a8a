package sbom

import (
	"bytes"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// Read is the inventory of an SBOM that Encode wrote (the components it can tell by their
// bom-ref: files, sysexts, preloaded images), for checking it against an image.
func Read(b []byte) (Inventory, error) {
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return Inventory{}, fmt.Errorf("not a CycloneDX JSON SBOM: %w", err)
	}
	var inv Inventory
	if bom.Components == nil {
		return inv, nil
	}
	for _, c := range *bom.Components {
		switch {
		case strings.HasPrefix(c.BOMRef, "file:"):
			f := File{Name: c.Name, Version: c.Version, SHA256: hashOf(c, cdx.HashAlgoSHA256), Path: prop(c, propPath)}
			if c.ExternalReferences != nil && len(*c.ExternalReferences) > 0 {
				f.URL = (*c.ExternalReferences)[0].URL
			}
			inv.Files = append(inv.Files, f)
		case strings.HasPrefix(c.BOMRef, "sysext:"):
			inv.Sysexts = append(inv.Sysexts, Sysext{File: c.Name, Version: c.Version, SHA512: hashOf(c, cdx.HashAlgoSHA512), Path: prop(c, propPath)})
		case strings.HasPrefix(c.BOMRef, "image:"):
			ref := strings.TrimPrefix(c.BOMRef, "image:")
			i := strings.LastIndex(ref, "@")
			if i < 0 {
				return inv, fmt.Errorf("SBOM component %q: a container image without its digest", c.BOMRef)
			}
			inv.Images = append(inv.Images, Image{Ref: ref[:i], Digest: ref[i+1:], Platform: prop(c, propPlatform)})
		}
	}
	return inv, nil
}

func hashOf(c cdx.Component, alg cdx.HashAlgorithm) string {
	if c.Hashes != nil {
		for _, h := range *c.Hashes {
			if h.Algorithm == alg {
				return h.Value
			}
		}
	}
	return ""
}

func prop(c cdx.Component, name string) string {
	if c.Properties != nil {
		for _, p := range *c.Properties {
			if p.Name == name {
				return p.Value
			}
		}
	}
	return ""
}
