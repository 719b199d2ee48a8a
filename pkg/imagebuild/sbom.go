package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// inventory is what the record says the image holds, for its SBOM; at is its time (the build's
// epoch: the sysext method takes it from the base image, so the same inputs give the same SBOM;
// zero: none).
func inventory(r *record.Record, at time.Time) sbom.Inventory {
	inv := sbom.Inventory{Tool: r.Tools.FlatcarCapo, Time: at,
		Subject: sbom.Subject{Name: r.ImageName, Method: r.Method},
		Flatcar: sbom.Flatcar{Channel: r.Channel, Version: r.FlatcarVersion, Arch: r.Arch, File: r.Base.File, URL: r.Base.URL,
			SHA512: r.Base.SHA512, Verified: r.Base.Verified}}
	if s := r.Base.SBOM; s != nil {
		inv.Flatcar.SBOM = &sbom.Ref{URL: s.URL, SHA512: s.SHA512, Verified: s.Verified}
	}
	if len(r.Artifacts) > 0 {
		inv.Subject.File, inv.Subject.SHA512 = r.Artifacts[0].File, r.Artifacts[0].SHA512
	}
	for _, d := range r.Downloads {
		f := sbom.File{Name: strings.TrimPrefix(d.Name, "bin/"), SHA256: d.SHA256, URL: d.URL, Version: r.KubernetesVersion}
		switch {
		case strings.HasPrefix(d.Name, "crictl"):
			f.Name, f.Version = "crictl", r.Inputs.Crictl
		case strings.HasPrefix(d.Name, "cni-plugins"):
			f.Name, f.Version = "cni-plugins", r.Inputs.CNI
		}
		inv.Files = append(inv.Files, f)
	}
	for _, a := range r.Artifacts[min(1, len(r.Artifacts)):] { // the sysext method's baked sysexts
		if strings.HasSuffix(a.File, ".raw") {
			inv.Sysexts = append(inv.Sysexts, sbom.Sysext{File: a.File, Version: sysext.KubernetesFileVersion(a.File), SHA512: a.SHA512})
		}
	}
	for _, im := range r.Images {
		inv.Images = append(inv.Images, sbom.Image{Ref: im.Name, Digest: im.Digest, Platform: im.Platform})
	}
	return inv
}

// writeSBOM writes <artifact>.cdx.json from the record and names it there.
func writeSBOM(r *record.Record, artifact string, at time.Time) error {
	b, err := inventory(r, at).Write(sbom.Path(artifact))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	r.SBOM = &record.SBOMFile{File: filepath.Base(sbom.Path(artifact)), SHA256: hex.EncodeToString(sum[:]), Format: "CycloneDX 1.6 JSON"}
	return nil
}
