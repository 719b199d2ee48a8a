package imagebuild

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/convert"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// stepConvert writes the qcow2 artifact (as `flatcar-capo convert` does, atomically; with
// --compress as convert --compress). Until the
// record is written the artifact counts as half-built: a failure or Ctrl-C removes it.
type stepConvert struct{ wrote string }

func (*stepConvert) Name() string { return "qcow2" }

func (s *stepConvert) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	artifact := keyArtifact.get(state)
	os.Remove(artifact + ".build.json") // the old record no longer describes what is built now
	compress := options(state).Compress
	h := sha512.New()
	opts := convert.Options{To: disk.FormatQcow2, Compress: compress}
	if options(state).Images.CarriesSecret() {
		opts.Mode = 0o600 // the proxy password is inside: not world-readable on the build host either
	}
	if !compress {
		opts.Hash = h // the record's sha512, computed while writing (compressed: read again)
	}
	img, err := openWork(state)
	if err != nil {
		return halt(state, err)
	}
	// The work image streamed into the artifact: each byte read once.
	outBytes, dataBytes, err := convert.Write(ctx, img, artifact, disk.FormatQcow2, opts)
	if err != nil {
		return halt(state, fmt.Errorf("writing %s: %w", artifact, err))
	}
	if !compress {
		keySHA512.put(state, record.Artifact{File: filepath.Base(artifact), Bytes: outBytes, SHA512: hex.EncodeToString(h.Sum(nil))})
	}
	s.wrote = artifact
	note(state, "%s (%s from %s of data)", artifact, progress.Bytes(outBytes), progress.Bytes(dataBytes))
	return multistep.ActionContinue
}

func (s *stepConvert) Cleanup(state multistep.StateBag) {
	if s.wrote != "" && !keyRecorded.get(state) {
		os.Remove(s.wrote)
	}
}
