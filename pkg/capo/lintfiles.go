package capo

import (
	"context"
	"fmt"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// LintRequest is `lint`'s: the manifest files ("-" is Stdin), the CAPI release, the cloud whose
// images the filters must match, and a build record whose artifact gives min_disk.
type LintRequest struct {
	Files       []string
	Stdin       func() ([]byte, error)
	CAPIVersion string
	Cloud       string // clouds.yaml name; "": no cloud lookups
	Record      string // IMAGE.qcow2.build.json, its image beside it
}

// LintFiles checks the options, reads the files, connects to the cloud and lints (lintInputs).
func LintFiles(ctx context.Context, r LintRequest) (*LintReport, error) {
	opts := lintOptions{CAPIVersion: r.CAPIVersion}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	inputs := make([]lintInput, 0, len(r.Files))
	for _, name := range r.Files {
		var data []byte
		var err error
		if name == "-" {
			data, err = r.Stdin()
			name = "<stdin>"
		} else {
			data, err = infile.ReadFile("lint argument", name, infile.Manifest)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		inputs = append(inputs, lintInput{Name: name, Data: data})
	}
	if r.Cloud != "" {
		c, err := glance.Connect(ctx, r.Cloud)
		if err != nil {
			return nil, err
		}
		opts.Images = func(ctx context.Context, name string, tags []string) (int, error) {
			return glance.CountActiveImages(ctx, c, name, tags)
		}
		if r.Record == "" { // the record's min_disk wins over the cloud's
			opts.ImageMinDisk = func(ctx context.Context, name string, tags []string) (int, error) {
				return glance.MinDiskOfImages(ctx, c, name, tags)
			}
		}
	}
	if r.Record != "" {
		// min_disk as upload sets it: the virtual size of the artifact next to the record.
		v, err := glance.VirtualSize(strings.TrimSuffix(r.Record, ".build.json"))
		if err != nil {
			return nil, errs.Invalidf("--from-record %s: the image next to it gives min_disk: %v", r.Record, err)
		}
		opts.MinDiskGiB = glance.MinDiskGiB(v)
	}
	return lintInputs(ctx, inputs, opts)
}
