package build

import (
	"context"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// A Method returns the steps that turn the work copy (KeyWork) into a raw image with
// Kubernetes installed (KeyRaw). They run between the common steps:
//
//	resolve, reuse, tools, workdir, kubernetes, fetch, work copy | method steps | OEM, inspect, qcow2, record, upload
type Method func(o *Options) []multistep.Step

var methods = map[string]Method{}

// RegisterMethod makes --method name available; method files call it from init.
func RegisterMethod(name string, m Method) { methods[name] = m }

func init() { RegisterMethod(MethodPacker, packerSteps) }

// packerSteps boot the work copy under Packer with a per-build user and provision it.
func packerSteps(o *Options) []multistep.Step {
	return []multistep.Step{
		&StepVMConfig{},
		&StepPayload{},
		&StepPacker{},
		&StepGrowDisk{},
	}
}

// preSteps are the common steps before the method's.
func preSteps() []multistep.Step {
	return []multistep.Step{
		&StepResolve{},
		&StepReuse{},
		&StepPreflight{},
		&StepWorkDir{},
		&StepKubernetes{},
		&StepFetch{},
		&StepWorkCopy{},
	}
}

// postSteps are the common steps after the method's.
func postSteps() []multistep.Step {
	return []multistep.Step{
		&StepOEM{},
		&StepInspect{},
		&StepConvert{},
		&StepRecord{},
		&StepUpload{},
	}
}

// Steps is the whole list for o.Method.
func Steps(o *Options) []multistep.Step {
	steps := preSteps()
	steps = append(steps, methods[o.Method](o)...)
	return append(steps, postSteps()...)
}

// A Preflight checks a method's tools before anything is downloaded (for packer: packer, its
// QEMU plugin, qemu-system-*, the accelerator) and returns a line for the progress output.
type Preflight func(ctx context.Context, o *Options) (string, error)

var preflights = map[string]Preflight{}

// RegisterPreflight sets the tool check of a method.
func RegisterPreflight(method string, p Preflight) { preflights[method] = p }

// StepPreflight runs the method's tool check right after resolving, so a missing packer or QEMU
// fails in seconds with its install hint, not after the download.
type StepPreflight struct{}

func (*StepPreflight) Name() string { return "tools" }

func (*StepPreflight) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	p := preflights[o.Method]
	if p == nil {
		note(state, "no external tools needed")
		return multistep.ActionContinue
	}
	line, err := p(ctx, o)
	if err != nil {
		return halt(state, err)
	}
	note(state, "%s", line)
	return multistep.ActionContinue
}

func (*StepPreflight) Cleanup(multistep.StateBag) {}

// HasMethod reports whether --method name is available.
func HasMethod(name string) bool { _, ok := methods[name]; return ok }
