package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepReuse keeps a finished artifact whose record has the same inputs and whose sha512 still
// matches the record (and whose SBOM is the one the record names); the later steps then only
// upload, rewrite the record and sign. --force skips it.
// It holds the artifact's lock (lockArtifact) from here to the end of the build.
type stepReuse struct {
	lock       *os.File
	artifact   string
	release    func() // unregisters the forced-exit unlock (interrupt.OnForcedExit)
	createdOut string // the --output-dir this build made, removed at the end if still empty
}

func (*stepReuse) Name() string { return "reuse" }

func (s *stepReuse) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
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
	old, err := record.Read(artifact)
	if err != nil {
		if _, serr := os.Stat(artifact); serr == nil {
			note(state, "%s has no valid build record; rebuilding", artifact)
		} else {
			note(state, "no finished artifact; building")
		}
		return multistep.ActionContinue
	}
	if old.InputsKey != rec.InputsKey {
		note(state, "%s was built from other inputs%s; rebuilding", artifact, nodeFilesChange(old.Inputs, rec.Inputs))
		return multistep.ActionContinue
	}
	sum, n, err := digest.SHA512(artifact)
	if err != nil || len(old.Artifacts) == 0 || old.Artifacts[0].SHA512 != sum || old.Artifacts[0].Bytes != n {
		note(state, "%s does not match its record (sha512); rebuilding", artifact)
		return multistep.ActionContinue
	}
	if why := sbomMismatch(artifact, old); why != "" {
		note(state, "%s; rebuilding", why)
		return multistep.ActionContinue
	}
	// Keep everything that described the artifact (its preloaded images and its SBOM, which the
	// record step leaves as it is): the record, the SBOM and the image stay in agreement, and a
	// re-signed rerun verifies. Timings and uploads are this run's.
	rec.Base, rec.Downloads, rec.Artifacts, rec.Tools = old.Base, old.Downloads, old.Artifacts, old.Tools
	rec.Images, rec.SBOM = old.Images, old.SBOM
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

// sbomMismatch says why the SBOM the old record names is not the one next to the artifact
// ("": it is, or the record names none); a reused artifact keeps it as it is.
func sbomMismatch(artifact string, old *record.Record) string {
	p := old.SBOMPath(artifact)
	if p == "" {
		return ""
	}
	b, err := infile.ReadFile("SBOM", p, infile.SBOM)
	if err != nil {
		return fmt.Sprintf("the SBOM %s cannot be read (%v)", p, err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != old.SBOM.SHA256 {
		return fmt.Sprintf("the SBOM %s is not the one its record names (sha256)", p)
	}
	return ""
}

// nodeFilesChange says why the node files part of the inputs differs ("": it does not).
func nodeFilesChange(old, now record.Inputs) string {
	switch {
	case old.NodeFiles == now.NodeFiles:
		return ""
	case old.NodeFiles == "":
		return " (its record, from an older flatcar-capo, does not name the node files it baked)"
	}
	return " (flatcar-capo's node files changed: kubeadm's drop-in, units or scripts)"
}
