package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
)

// stepWorkDir makes the private build directory (0700) inside the output directory (which the
// reuse step made), so the finished image is renamed, not copied, into place. Cleanup removes
// it with everything in it (work copy, SSH key, Ignition, payload); after a failure the
// method's log is first moved next to the artifact as <image>.log so the error can name it.
type stepWorkDir struct {
	dir  string
	lock *os.File // the owner lock (locks.go), held until Cleanup
	// release unregisters the directory's removal on a forced exit (interrupt.OnForcedExit)
	release func()
}

func (*stepWorkDir) Name() string { return "workdir" }

func (s *stepWorkDir) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	for _, l := range removeDeadLeftovers(o.OutputDir) {
		fmt.Fprintf(o.Log, "  %s\n", l)
	}
	dir, err := os.MkdirTemp(o.OutputDir, ".build-")
	if err != nil {
		return halt(state, fmt.Errorf("cannot create the build directory: %w", err))
	}
	s.dir = dir
	s.release = interrupt.OnForcedExit(func() { os.RemoveAll(dir) })
	if s.lock, err = lockBuildDir(dir); err != nil {
		return halt(state, err)
	}
	keyWorkDir.put(state, dir)
	note(state, "%s", dir)
	return multistep.ActionContinue
}

func (s *stepWorkDir) Cleanup(state multistep.StateBag) {
	if s.dir == "" {
		return
	}
	o := options(state)
	failed := keyError.get(state) != nil
	_, cancelled := state.GetOk(multistep.StateCancelled)
	if log := keyLogFile.get(state); log != "" && isUnder(log, s.dir) {
		if failed || cancelled {
			kept := filepath.Join(o.OutputDir, o.ImageName+".log")
			if os.Rename(log, kept) == nil {
				keyLogFile.put(state, kept)
				keyLogMoved.put(state, log)
			}
		} else {
			keyLogFile.remove(state)
		}
	}
	os.RemoveAll(s.dir)
	s.release()
	if s.lock != nil {
		s.lock.Close()
	}
}

func isUnder(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}
