package cli

import (
	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/imagebuild"
)

// addImageRefFlags are how manifests names the image: --image-ref, --image-id, --image-source
// and --image-sha512, or all of it (with name, Kubernetes version and flavor) from --from-record.
func addImageRefFlags(f *pflag.FlagSet, im *capo.ImageFlags, record *string) {
	f.StringVar(&im.Ref, "image-ref", capo.ImageRefFilter, "how machine templates name the image: filter (image.filter.name), id (image.id, the Glance ID), orc (imageRef to an ORC Image, CAPO >= v0.11)")
	f.StringVar(&im.ID, "image-id", "", "the Glance image ID for --image-ref id or orc (sets "+capo.VarImageID+"; default: from --from-record)")
	f.StringVar(&im.Source, "image-source", "", "URL of the image's qcow2 on your HTTP server: a managed ORC Image downloads it (sha512-checked, onDelete: detach); implies --image-ref orc")
	f.StringVar(&im.SHA512, "image-sha512", "", "sha512 of the --image-source file (default: from --from-record)")
	f.StringVar(record, "from-record", "", "a build record (IMAGE.qcow2.build.json): image name, Kubernetes version, flavor, Glance ID and sha512 from it")
}

// recordReader reads --from-record as manifests takes it (nil without one).
func recordReader(path string) func() (*capo.Record, error) {
	if path == "" {
		return nil
	}
	return func() (*capo.Record, error) {
		r, err := imagebuild.RecordFile(path)
		if err != nil {
			return nil, err
		}
		c := &capo.Record{Path: path, ImageName: r.ImageName, KubernetesVersion: r.KubernetesVersion, Flavor: r.Flavor, Arch: r.Arch}
		for _, g := range r.Glance {
			c.GlanceIDs = append(c.GlanceIDs, g.ID)
		}
		for _, a := range r.Artifacts {
			c.Artifacts = append(c.Artifacts, capo.RecordArtifact{File: a.File, SHA512: a.SHA512})
		}
		return c, nil
	}
}
