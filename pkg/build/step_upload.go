package build

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// StepUpload uploads the artifact to every --cloud with the metadata `upload` derives from the
// build record, then adds the Glance IDs to the record.
type StepUpload struct{}

func (*StepUpload) Name() string      { return "upload" }
func (*StepUpload) RunsOnReuse() bool { return true }

func (*StepUpload) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), record(state)
	if len(o.Clouds) == 0 {
		note(state, "no --cloud: not uploaded")
		return multistep.ActionContinue
	}
	artifact := getString(state, KeyArtifact)
	mode, err := glance.ParseOnExists(o.OnExists)
	if err != nil {
		return halt(state, fmt.Errorf("--on-exists: %w", err))
	}
	br, err := glance.ReadBuildRecord(artifact)
	if err != nil {
		return halt(state, err)
	}
	meta, err := glance.BuildMetadata(glance.MetadataInput{Record: br})
	if err != nil {
		return halt(state, err)
	}
	format, size, err := glance.DetectFileFormat(artifact)
	if err != nil {
		return halt(state, err)
	}
	if format != disk.FormatQcow2 {
		return halt(state, fmt.Errorf("%s is %s, not qcow2", artifact, format))
	}
	req := &glance.Request{File: artifact, Format: format, Size: size, Name: o.ImageName, Metadata: meta,
		OnExists: mode, Wait: 30 * time.Minute, Log: &lockedWriter{w: o.Log}}
	results, err := uploadAll(ctx, o.Clouds, req)
	rec.Glance = rec.Glance[:0]
	var ids []string
	for _, r := range results {
		rec.Glance = append(rec.Glance, GlanceInfo{Cloud: r.Cloud, Region: r.Region, ID: r.ID, Action: string(r.Action)})
		ids = append(ids, fmt.Sprintf("%s %s (%s)", r.Cloud, r.ID, r.Action))
	}
	if len(results) > 0 {
		if werr := rec.write(artifact); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return halt(state, err)
	}
	note(state, "%s", strings.Join(ids, ", "))
	return multistep.ActionContinue
}

func (*StepUpload) Cleanup(multistep.StateBag) {}

// uploadAll uploads to every cloud at once; the results are in --cloud order.
func uploadAll(ctx context.Context, clouds []string, req *glance.Request) ([]*glance.Result, error) {
	results := make([]*glance.Result, len(clouds))
	errs := make([]error, len(clouds))
	var wg sync.WaitGroup
	for i, name := range clouds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := glance.Connect(ctx, name)
			if err != nil {
				errs[i] = err
				return
			}
			res, err := glance.Upload(ctx, c, req)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", c.Label(), err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	var ok []*glance.Result
	for _, r := range results {
		if r != nil {
			ok = append(ok, r)
		}
	}
	return ok, errors.Join(errs...)
}

type lockedWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
