package imagebuild

import (
	"context"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// A Method is how Kubernetes gets into the image: its steps turn the work image (workimage.go:
// the raw work copy, or the overlay of an overlayMethods entry) into one with Kubernetes
// installed, between the common steps:
//
//	resolve, reuse, tools, workdir, kubernetes, fetch, work copy | method steps | OEM, inspect, qcow2, record, upload
type Method interface {
	// Steps are the method's own steps.
	Steps() []multistep.Step
	// Preflight checks the method's external tools right after resolving, so a missing packer
	// or QEMU fails in seconds with its install hint, not after the download. It may leave
	// what it found in state for the method's steps, and returns the progress line.
	Preflight(ctx context.Context, o *Options, state multistep.StateBag) (string, error)
	// Plan adds the method's part to a dry run's plan.
	Plan(ctx context.Context, o *Options, p *Plan) error
	// NodeFiles are the files flatcar-capo defines that the method bakes (nodefiles.go): the
	// inputs key hashes them.
	NodeFiles(o *Options) ([]nodeFile, error)
}

// methods are the values of --method.
var methods = map[string]Method{MethodPacker: packerMethod{}, MethodSysext: sysextMethod{}}

// noTools is the Preflight of a method that needs no external tool.
type noTools struct{}

func (noTools) Preflight(context.Context, *Options, multistep.StateBag) (string, error) {
	return "no external tools needed", nil
}

// allSteps is the whole list for o.Method: the common steps before and after the method's.
func allSteps(o *Options) []multistep.Step {
	steps := []multistep.Step{&stepResolve{}, &stepReuse{}, &stepPreflight{}, &stepWorkDir{}, &stepKubernetes{}, &stepContainerd{}, &stepFetch{}, &stepWorkCopy{}}
	steps = append(steps, methods[o.Method].Steps()...)
	return append(steps, &stepOEM{}, &stepInspect{}, &stepConvert{}, &stepRecord{}, &stepUpload{}, &stepSign{})
}

// stepPreflight runs the method's tool check.
type stepPreflight struct{ noCleanup }

func (*stepPreflight) Name() string { return "tools" }

func (*stepPreflight) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	line, err := methods[o.Method].Preflight(ctx, o, state)
	if err != nil {
		return halt(state, err)
	}
	note(state, "%s", line)
	return multistep.ActionContinue
}
