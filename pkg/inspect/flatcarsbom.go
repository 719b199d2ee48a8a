package inspect

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"path/filepath"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// readFlatcarSBOM reads Flatcar's package SBOM of the image's release (a local file: inspect has
// no release to check it against, so the reference says unverified) and refers to it by its
// file name and sha512, as build refers to the verified one by its URL.
func readFlatcarSBOM(path string) (*sbom.Ref, error) {
	b, err := infile.ReadFile("--flatcar-sbom", path, infile.SPDX)
	if err != nil {
		return nil, err
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.SPDXVersion == "" {
		return nil, errs.Invalidf("--flatcar-sbom %s is not an SPDX JSON document (no spdxVersion); give the release's flatcar_production_image_sbom.json", path)
	}
	sum := sha512.Sum512(b)
	return &sbom.Ref{URL: filepath.Base(path), SHA512: hex.EncodeToString(sum[:])}, nil
}
