package imagebuild

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// stepUpload uploads the artifact to every --cloud with the metadata `upload` derives from the
// build record, then adds the Glance IDs to the record.
type stepUpload struct{ noCleanup }

func (*stepUpload) Name() string      { return "upload" }
func (*stepUpload) RunsOnReuse() bool { return true }

func (*stepUpload) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	if len(o.Clouds) == 0 {
		note(state, "no --cloud: not uploaded")
		return multistep.ActionContinue
	}
	artifact := keyArtifact.get(state)
	mode, err := glance.ParseOnExists(o.OnExists)
	if err != nil {
		return halt(state, fmt.Errorf("--on-exists: %w", err))
	}
	req := &glance.Request{Name: o.ImageName, Visibility: o.Visibility, OnExists: mode, Wait: 30 * time.Minute, Log: o.Log, Signing: o.GlanceSigning}
	format := disk.FormatQcow2
	if o.DiskFormat == "raw" {
		format = disk.FormatRaw
	}
	if err := req.SetFile(artifact, format); err != nil {
		return halt(state, err)
	}
	req.Metadata, err = glance.BuildMetadata(glance.MetadataInput{Record: *rec, Properties: o.Properties, Tags: o.Tags, VirtualSize: req.VirtualSize})
	if err != nil {
		return halt(state, err)
	}
	if len(rec.Artifacts) > 0 { // hashed by the record step (or verified by the reuse step)
		req.KnownHash("sha512", rec.Artifacts[0].SHA512)
	}
	results, err := glance.UploadAll(ctx, o.Clouds, req)
	rec.Glance = rec.Glance[:0]
	var ids []string
	for _, r := range results {
		rec.Glance = append(rec.Glance, record.GlanceInfo{Cloud: r.Cloud, Region: r.Region, ID: r.ID, Action: string(r.Action)})
		ids = append(ids, fmt.Sprintf("%s %s (%s)", r.Cloud, r.ID, r.Action))
	}
	if len(results) > 0 {
		if werr := rec.Write(artifact); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return halt(state, err)
	}
	note(state, "%s", strings.Join(ids, ", "))
	return multistep.ActionContinue
}
