package cli

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/build"
	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// imageRefFlags are how manifests names the image: --image-ref, --image-id, --image-source and
// --image-sha512, or all of it (with name, Kubernetes version and flavor) from --from-record.
type imageRefFlags struct {
	ref, id, source, sha512, record string
	rec                             *build.Record
}

func addImageRefFlags(f *pflag.FlagSet, im *imageRefFlags) {
	f.StringVar(&im.ref, "image-ref", capo.ImageRefFilter, "how machine templates name the image: filter (image.filter.name), id (image.id, the Glance ID), orc (imageRef to an ORC Image, CAPO >= v0.11)")
	f.StringVar(&im.id, "image-id", "", "the Glance image ID for --image-ref id or orc (sets "+capo.VarImageID+"; default: from --from-record)")
	f.StringVar(&im.source, "image-source", "", "URL of the image's qcow2 on your HTTP server: a managed ORC Image downloads it (sha512-checked, onDelete: detach); implies --image-ref orc")
	f.StringVar(&im.sha512, "image-sha512", "", "sha512 of the --image-source file (default: from --from-record)")
	f.StringVar(&im.record, "from-record", "", "a build record (IMAGE.qcow2.build.json): image name, Kubernetes version, flavor, Glance ID and sha512 from it")
}

// readRecord loads --from-record.
func (im *imageRefFlags) readRecord() error {
	if im.record == "" {
		return nil
	}
	var err error
	im.rec, err = build.RecordFile(im.record)
	return err
}

// apply fills values and the flavor from the record (flags win) and returns the render options'
// image part.
func (im *imageRefFlags) apply(cmd *cobra.Command, values map[string]string, flavor *string) (string, *capo.ImageSource, error) {
	r := im.rec
	if r != nil {
		setDefault := func(k, v string) {
			if _, ok := values[k]; !ok && v != "" {
				values[k] = v
			}
		}
		setDefault(capo.VarImageName, r.ImageName)
		setDefault(capo.VarKubernetesVersion, r.KubernetesVersion)
		if !cmd.Flags().Changed("flavor") && r.Flavor != "" {
			*flavor = r.Flavor
		}
	}
	ref := im.ref
	if im.source != "" && !cmd.Flags().Changed("image-ref") {
		ref = capo.ImageRefORC
	}
	id := im.id
	if id == "" && r != nil && len(r.Glance) > 0 && (ref == capo.ImageRefID || ref == capo.ImageRefORC) && im.source == "" {
		id = r.Glance[0].ID
	}
	setID := values[capo.VarImageID] // from --set
	if id != "" && ref != capo.ImageRefFilter {
		values[capo.VarImageID] = id
	}
	var src *capo.ImageSource
	if im.source != "" {
		src = &capo.ImageSource{URL: im.source, SHA512: strings.ToLower(im.sha512), MinRAMMiB: glance.DefaultMinRAMMiB}
	}
	if src != nil && r != nil {
		src.Arch = r.Arch
		for _, a := range r.Artifacts {
			if a.File == r.ImageName+".qcow2" && src.SHA512 == "" {
				src.SHA512 = a.SHA512
			}
		}
		// min_disk as upload sets it, when the artifact is still next to its record.
		artifact := strings.TrimSuffix(im.record, ".build.json")
		if filepath.Ext(artifact) == ".qcow2" {
			if v, err := glance.VirtualSize(artifact); err == nil {
				src.MinDiskGiB = glance.MinDiskGiB(v)
			}
		}
	}
	if err := (capo.ImageRefOptions{Ref: ref, ID: id, SetID: setID, Source: src, SHA512Given: im.sha512 != ""}).Validate(); err != nil {
		return "", nil, err
	}
	return ref, src, nil
}
