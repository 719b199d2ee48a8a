package imagebuild

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/epoch"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// Result is what Run returns: the build record, and for --dry-run the plan (and no build). As
// JSON (build -o json) it is the record with the plan's "plan".
type Result struct {
	*record.Record
	Plan *Plan `json:"plan,omitempty"`
}

// Run builds the image o describes and returns its record. Progress goes to o.Log, one line
// per step. On failure or cancellation every step's Cleanup has run: no VM, no temp files, no
// half-built artifact; the error names the method's log when there is one.
func Run(ctx context.Context, o *Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	state := new(multistep.BasicStateBag)
	// SOURCE_DATE_EPOCH, read once: the time of everything the build writes (buildTime).
	if t, set, err := epoch.Get(); err != nil {
		return nil, errs.Invalidf("%v; unset it or give seconds since 1970", err)
	} else if set {
		keyEpoch.put(state, t)
	}
	keyOptions.put(state, o)
	rec := newRecord(o)
	keyRecord.put(state, rec)
	var steps []multistep.Step
	if o.DryRun {
		steps = []multistep.Step{&stepResolve{}, &stepPlan{}}
	} else {
		steps = allSteps(o)
	}
	runner := &multistep.BasicRunner{}
	for i, s := range steps {
		runner.Steps = append(runner.Steps, &timed{step: s, n: i + 1, of: len(steps), o: o, rec: rec})
	}
	start := time.Now()
	keyStart.put(state, start)
	runner.Run(ctx, state)
	rec.Seconds = time.Since(start).Seconds()
	if _, cancelled := state.GetOk(multistep.StateCancelled); cancelled || ctx.Err() != nil {
		return nil, interrupted(state, options(state), cmp.Or(ctx.Err(), context.Canceled))
	}
	if err := keyError.get(state); err != nil {
		return nil, withLog(state, err)
	}
	return &Result{Record: rec, Plan: keyPlan.get(state)}, nil
}

// interrupted says what a cancelled build really left, now that every Cleanup has run: the
// upload's half-made images (its error says), the method's log kept next to the artifact, a
// build directory that could not be removed; or that nothing was.
func interrupted(state multistep.StateBag, o *Options, err error) error {
	left, _, _ := interrupt.Report(keyError.get(state))
	log, dir := keyLogFile.get(state), keyWorkDir.get(state) // "": not made, which os.Stat says too
	if _, serr := os.Stat(log); serr == nil {
		left = append(left, "the build's log "+log+" (kept to show how far it got)")
	}
	if _, serr := os.Stat(dir); serr == nil {
		left = append(left, "the build directory "+dir+" (the next build in "+o.OutputDir+" removes it)")
	}
	if len(left) > 0 {
		return interrupt.Left(err, left...)
	}
	where := cmp.Or(o.OutputDir, "the output directory")
	return interrupt.Nothing(err, "no image or record was written to "+where+", the build directory was removed and downloads already verified stay in the cache")
}

// withLog makes the error name the method's full log where it is now: the build directory is
// gone, so a log a step named there was moved next to the artifact (keyLogMoved).
func withLog(state multistep.StateBag, err error) error {
	log := keyLogFile.get(state)
	if log == "" {
		return err
	}
	return &logError{err: err, log: log, moved: keyLogMoved.get(state)}
}

type logError struct {
	err        error
	log, moved string
}

func (e *logError) Error() string {
	msg := e.err.Error()
	if e.moved != "" {
		msg = strings.ReplaceAll(msg, e.moved, e.log)
	}
	if strings.Contains(msg, e.log) {
		return msg
	}
	return fmt.Sprintf("%s\nfull log: %s", msg, e.log)
}
func (e *logError) Unwrap() error { return e.err }

// reuseAware steps still run when a finished artifact is reused (upload, record).
type reuseAware interface{ RunsOnReuse() bool }

// namedStep is a step with a short name for the progress line and the record.
type namedStep interface{ Name() string }

// timed wraps a step: it prints one line with the step's elapsed time and its note, and
// records the timing.
type timed struct {
	step  multistep.Step
	n, of int
	o     *Options
	rec   *record.Record
}

func (t *timed) name() string {
	if n, ok := t.step.(namedStep); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", t.step)
}

func (t *timed) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	if keyReused.get(state) {
		if r, ok := t.step.(reuseAware); !ok || !r.RunsOnReuse() {
			return multistep.ActionContinue
		}
	}
	keyNote.remove(state)
	start := time.Now()
	action := t.step.Run(ctx, state)
	d := time.Since(start)
	status := "done"
	if action == multistep.ActionHalt {
		status = "FAILED"
		if keyError.get(state) == nil {
			status = "stopped"
		}
	}
	if ctx.Err() != nil {
		status = "interrupted"
	}
	note := keyNote.get(state)
	if note != "" {
		note = ": " + note
	}
	fmt.Fprintf(t.o.Log, "[%d/%d] %-12s %-6s %6.1fs%s\n", t.n, t.of, t.name(), status, d.Seconds(), note)
	t.rec.Steps = append(t.rec.Steps, record.StepTiming{Name: t.name(), Seconds: d.Seconds(), Status: status})
	return action
}

func (t *timed) Cleanup(state multistep.StateBag) { t.step.Cleanup(state) }

func note(state multistep.StateBag, format string, a ...any) {
	keyNote.put(state, fmt.Sprintf(format, a...))
}

// indented shows a library's lines under a step's, each trimmed and after prefix; one Write
// stays one Write, so the lines of concurrent downloads do not interleave.
type indented struct {
	w      io.Writer
	prefix string
}

func (in indented) Write(p []byte) (int, error) {
	var b strings.Builder
	for l := range strings.Lines(string(p)) {
		b.WriteString(in.prefix + strings.TrimSpace(l) + "\n")
	}
	_, err := io.WriteString(in.w, b.String())
	return len(p), err
}
