package imagebuild

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// stepSign writes the detached signatures --sign-key asks for: ARTIFACT.sig, ARTIFACT.build.json.sig
// and, when the record names an SBOM, SBOM.sig, each what `cosign verify-blob --key` accepts. It
// runs last, after upload has added the Glance IDs to the record, so the record it signs is final.
type stepSign struct{ noCleanup }

func (*stepSign) Name() string      { return "sign" }
func (*stepSign) RunsOnReuse() bool { return true }

func (*stepSign) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	if o.SignKey == nil {
		return multistep.ActionContinue
	}
	artifact := keyArtifact.get(state)
	files, err := SignedFiles(artifact)
	if err != nil {
		return halt(state, err)
	}
	var sigs []string
	for _, f := range files {
		sig, err := signing.SignFile(o.SignKey, f)
		if err != nil {
			return halt(state, err)
		}
		sigs = append(sigs, filepath.Base(sig))
	}
	note(state, "%s", strings.Join(sigs, ", "))
	return multistep.ActionContinue
}

// SignedFiles are the files --sign-key signs for artifact: the image, its record and the SBOM the
// record names (a "sbom" file name, or an object with a "file", beside the artifact), in order.
func SignedFiles(artifact string) ([]string, error) {
	recPath := RecordPath(artifact)
	files := []string{artifact, recPath}
	data, err := infile.ReadFile("build record", recPath, infile.Record)
	if err != nil {
		return nil, err
	}
	var r struct {
		SBOM *SBOMFile `json:"sbom"`
	}
	if json.Unmarshal(data, &r) == nil && r.SBOM != nil && r.SBOM.File != "" {
		files = append(files, filepath.Join(filepath.Dir(artifact), filepath.Base(r.SBOM.File)))
	}
	return files, nil
}
