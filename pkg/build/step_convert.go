package build

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
)

// stepConvert writes the qcow2 artifact (as `flatcar-capo convert` does, atomically; with
// --compress as convert --compress). Until the
// record is written the artifact counts as half-built: a failure or Ctrl-C removes it.
type stepConvert struct{ wrote string }

func (*stepConvert) Name() string { return "qcow2" }

func (s *stepConvert) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	artifact := getString(state, KeyArtifact)
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
	var res convert.Result
	var err error
	if w := overlay(state); w != nil { // the overlay streamed into the artifact: each byte read once
		res.OutputBytes, res.DataBytes, err = convert.Write(ctx, w.Overlay, artifact, disk.FormatQcow2, opts)
		if err != nil {
			err = fmt.Errorf("writing %s: %w", artifact, err)
		}
	} else {
		res, err = convert.File(ctx, getString(state, KeyRaw), artifact, opts)
	}
	if err != nil {
		return halt(state, err)
	}
	if !compress {
		state.Put(KeyArtifactSHA512, Artifact{File: filepath.Base(artifact), Bytes: res.OutputBytes, SHA512: hex.EncodeToString(h.Sum(nil))})
	}
	s.wrote = artifact
	note(state, "%s (%s from %s of data)", artifact, progress.Bytes(res.OutputBytes), progress.Bytes(res.DataBytes))
	return multistep.ActionContinue
}

func (s *stepConvert) Cleanup(state multistep.StateBag) {
	if s.wrote == "" {
		return
	}
	if done, _ := state.Get(KeyRecorded).(bool); !done {
		os.Remove(s.wrote)
	}
}
