package imagebuild

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

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
	var sigs []string
	for _, f := range buildRecord(state).SignedFiles(artifact) { // the record as the record and upload steps wrote it
		sig, err := signing.SignFile(o.SignKey, f)
		if err != nil {
			return halt(state, err)
		}
		sigs = append(sigs, filepath.Base(sig))
	}
	note(state, "%s", strings.Join(sigs, ", "))
	return multistep.ActionContinue
}
