package capo

import (
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// ImageFlags are how manifests names the image: --image-ref (RefGiven: given), --image-id,
// --image-source and --image-sha512.
type ImageFlags struct {
	Ref, ID, Source, SHA512 string
	RefGiven                bool
}

// apply fills values from the record at path (flags win) and returns the render options' image
// part.
func (im ImageFlags) apply(values map[string]string, r *record.Record, path string) (string, *ImageSource, error) {
	if r != nil {
		for k, v := range map[string]string{VarImageName: r.ImageName, VarKubernetesVersion: r.KubernetesVersion} {
			if _, ok := values[k]; !ok && v != "" {
				values[k] = v
			}
		}
	}
	ref := im.Ref
	if im.Source != "" && !im.RefGiven {
		ref = ImageRefORC
	}
	id := im.ID
	if id == "" && r != nil && len(r.Glance) > 0 && (ref == ImageRefID || ref == ImageRefORC) && im.Source == "" {
		id = r.Glance[0].ID
	}
	setID := values[VarImageID] // from --set
	if id != "" && ref != ImageRefFilter {
		values[VarImageID] = id
	}
	var src *ImageSource
	if im.Source != "" {
		src = &ImageSource{URL: im.Source, SHA512: strings.ToLower(im.SHA512), MinRAMMiB: glance.DefaultMinRAMMiB}
	}
	if src != nil && r != nil {
		src.Arch = r.Arch
		for _, a := range r.Artifacts {
			if a.File == r.ImageName+".qcow2" && src.SHA512 == "" {
				src.SHA512 = a.SHA512
			}
		}
		// min_disk as upload sets it, when the artifact is still next to its record.
		artifact := strings.TrimSuffix(path, ".build.json")
		if filepath.Ext(artifact) == ".qcow2" {
			if v, err := glance.VirtualSize(artifact); err == nil {
				src.MinDiskGiB = glance.MinDiskGiB(v)
			}
		}
	}
	if err := (imageRefOptions{Ref: ref, ID: id, SetID: setID, Source: src, SHA512Given: im.SHA512 != ""}).Validate(); err != nil {
		return "", nil, err
	}
	return ref, src, nil
}
