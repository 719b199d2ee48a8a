package imagebuild

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/inspect"
)

// stepInspect judges the output image for --oem as `inspect IMAGE --for OEM` does; NOT READY
// fails the build with the findings.
type stepInspect struct{ noCleanup }

func (*stepInspect) Name() string { return "inspect" }

func (*stepInspect) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	img, err := openWork(state)
	if err != nil {
		return halt(state, err)
	}
	rep, err := inspect.Inspect(img, o.OEM)
	if err != nil {
		return halt(state, fmt.Errorf("inspecting the built image: %w", err))
	}
	var msgs []string
	for _, f := range rep.Findings {
		msgs = append(msgs, fmt.Sprintf("%s %s: %s", f.Level, f.Code, f.Message))
	}
	if rep.Verdict == inspect.NotReady {
		return halt(state, fmt.Errorf("the built image is NOT READY for %s:\n  %s", o.OEM, strings.Join(msgs, "\n  ")))
	}
	findings := ""
	if len(msgs) > 0 {
		findings = " (" + strings.Join(msgs, "; ") + ")"
	}
	note(state, "%s for %s%s", rep.Verdict, o.OEM, findings)
	return multistep.ActionContinue
}
