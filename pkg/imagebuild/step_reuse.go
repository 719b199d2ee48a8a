package imagebuild

import (
	"context"
	"fmt"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepReuse keeps a finished artifact whose record has the same inputs and whose sha512 still
// matches the record; the later steps then only upload and rewrite the record. --force skips it.
// It holds the artifact's lock (lockArtifact) from here to the end of the build.
type stepReuse struct {
	lock       *os.File
	artifact   string
	release    func() // unregisters the forced-exit unlock (interrupt.OnForcedExit)
	createdOut string // the --output-dir this build made, removed at the end if still empty
}

func (*stepReuse) Name() string { return "reuse" }

func (s *stepReuse) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), record(state)
	artifact := keyArtifact.get(state)
	if _, err := os.Stat(o.OutputDir); os.IsNotExist(err) {
		s.createdOut = o.OutputDir
	}
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return halt(state, fmt.Errorf("--output-dir: %w", err))
	}
	lock, err := lockArtifact(ctx, artifact, o.Log)
	if err != nil {
		return halt(state, err)
	}
	s.lock, s.artifact = lock, artifact
	s.release = interrupt.OnForcedExit(func() { unlockArtifact(lock, artifact) })
	if o.Force {
		note(state, "--force: rebuilding")
		return multistep.ActionContinue
	}
	old, err := ReadRecord(artifact)
	if err != nil {
		if _, serr := os.Stat(artifact); serr == nil {
			note(state, "%s has no valid build record; rebuilding", artifact)
		} else {
			note(state, "no finished artifact; building")
		}
		return multistep.ActionContinue
	}
	if old.InputsKey != rec.InputsKey {
		note(state, "%s was built from other inputs; rebuilding", artifact)
		return multistep.ActionContinue
	}
	sum, n, err := digest.SHA512(artifact)
	if err != nil || len(old.Artifacts) == 0 || old.Artifacts[0].SHA512 != sum || old.Artifacts[0].Bytes != n {
		note(state, "%s does not match its record (sha512); rebuilding", artifact)
		return multistep.ActionContinue
	}
	// Keep what described the artifact; timings and uploads are this run's.
	rec.Base, rec.Downloads, rec.Artifacts, rec.Tools = old.Base, old.Downloads, old.Artifacts, old.Tools
	rec.Reused = true
	keyReused.put(state, true)
	note(state, "reusing %s: its record matches these inputs and its sha512 verifies (--force rebuilds)", artifact)
	return multistep.ActionContinue
}

// Cleanup runs when the whole build is over (multistep cleans up in reverse): the lock goes last.
func (s *stepReuse) Cleanup(multistep.StateBag) {
	if s.lock != nil {
		s.release()
		unlockArtifact(s.lock, s.artifact)
		s.lock = nil
	}
	if s.createdOut != "" {
		os.Remove(s.createdOut) // only when empty (a failed or cancelled build): nothing of the user's is touched
	}
}
