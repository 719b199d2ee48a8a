package inspect

import (
	"context"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// FileOptions are `inspect`'s: the platform to judge against ("": the image's own oem_id) and,
// when SBOMFile is set, where the SBOM of what the image holds goes (Tool names the writer),
// referring to Flatcar's package SBOM at FlatcarSBOM when set.
type FileOptions struct {
	Target, SBOMFile, FlatcarSBOM, Tool string
}

// File checks o, opens the image at path, reports on it and writes the SBOM. A NOT READY
// image is a report, not an error.
func File(ctx context.Context, path string, o FileOptions) (*Report, error) {
	if o.Target != "" {
		if err := oem.ValidateID(o.Target, true); err != nil {
			return nil, err
		}
	}
	if o.SBOMFile != "" {
		if err := atomicfile.CheckPath(o.SBOMFile); err != nil {
			return nil, err
		}
		if a, err := os.Stat(path); err == nil {
			if b, err := os.Stat(o.SBOMFile); err == nil && os.SameFile(a, b) {
				return nil, errs.Invalidf("--sbom-file %s is the image itself; give another path, e.g. %s.cdx.json", o.SBOMFile, path)
			}
		}
	}
	var flatcarSBOM *sbom.Ref
	if o.FlatcarSBOM != "" {
		if o.SBOMFile == "" {
			return nil, errs.Invalidf("--flatcar-sbom %s adds Flatcar's SBOM to the SBOM inspect writes: add --sbom-file PATH", o.FlatcarSBOM)
		}
		var err error
		if flatcarSBOM, err = readFlatcarSBOM(o.FlatcarSBOM); err != nil {
			return nil, err
		}
	}
	img, err := disk.Open(path, false)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	r, err := Inspect(img, o.Target)
	if err != nil {
		return nil, err
	}
	if o.SBOMFile != "" {
		inv, err := SBOM(ctx, img, r, o.Tool)
		if err != nil {
			return nil, err
		}
		if flatcarSBOM != nil {
			if inv.Flatcar.Version == "" {
				return nil, errs.Invalidf("--flatcar-sbom %s: %s has no Flatcar os-release to attach it to; inspect it without --flatcar-sbom", o.FlatcarSBOM, path)
			}
			inv.Flatcar.SBOM = flatcarSBOM
		}
		if _, err := inv.Write(o.SBOMFile); err != nil {
			return nil, err
		}
	}
	return r, nil
}
