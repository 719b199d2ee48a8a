package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/ignition"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
)

// packerMethod boots the work copy under Packer with a per-build user and provisions it.
type packerMethod struct{}

func (packerMethod) Steps() []multistep.Step {
	return []multistep.Step{&stepVMConfig{}, &stepImages{}, &stepPayload{}, &stepPacker{}, &stepGrowDisk{}}
}

// Preflight probes packer, its QEMU plugin, QEMU and the accelerator once; the packer step
// builds with what it found (keyTools).
func (packerMethod) Preflight(ctx context.Context, o *Options, state multistep.StateBag) (string, error) {
	t, err := packer.Probe(ctx, packer.Config{Packer: o.Packer, QEMUBinary: o.QEMUBinary, Accelerator: o.Accelerator, Driver: o.driver})
	if err != nil {
		return "", err
	}
	keyTools.put(state, t)
	s := fmt.Sprintf("packer %s (%s), %s, accelerator %s", t.PackerVersion, t.Packer, t.QEMUBinary, t.Accelerator)
	if t.AcceleratorNote != "" {
		s += "; " + t.AcceleratorNote
	}
	return s, nil
}

// PackerPlan is the packer method's part of a dry run.
type PackerPlan struct {
	packer.PlanInfo
}

// Lines are the plan's text form.
func (p PackerPlan) Lines() []string {
	l := []string{
		fmt.Sprintf("packer:      %s (%s)", p.Packer, p.PackerVersion),
		fmt.Sprintf("qemu:        %s, accelerator %s", p.QEMUBinary, p.Accelerator),
	}
	if p.AcceleratorNote != "" {
		l = append(l, "             "+p.AcceleratorNote)
	}
	l = append(l, "variables:")
	for _, v := range p.Vars {
		l = append(l, "  "+v)
	}
	l = append(l, "template:")
	for t := range strings.Lines(p.Template) {
		l = append(l, "  | "+strings.TrimSuffix(t, "\n"))
	}
	return l
}

func (packerMethod) Plan(ctx context.Context, o *Options, p *Plan) error {
	pi, err := packerPlan(ctx, o)
	if err != nil {
		return err
	}
	p.MethodPlan = PackerPlan{pi}
	return nil
}

// packerPlan asks pkg/packer for the plan (packer, QEMU, accelerator, rendered template) with
// empty placeholder inputs in a throwaway directory (pkg/packer checks that its inputs exist):
// nothing boots and nothing of the build exists yet.
func packerPlan(ctx context.Context, o *Options) (packer.PlanInfo, error) {
	dir, err := os.MkdirTemp("", "flatcar-capo-plan-")
	if err != nil {
		return packer.PlanInfo{}, err
	}
	defer os.RemoveAll(dir)
	in := packerInputs{workDir: dir, kubernetes: &o.Kubernetes, vm: vmFiles{user: ignition.DefaultUser},
		base: filepath.Join(dir, "work.raw"), payload: filepath.Join(dir, "payload")}
	in.vm.key = filepath.Join(dir, "build_ed25519")
	vmConfig := &in.vm.ignition
	if o.Base == "openstack" {
		vmConfig = &in.vm.drive
	}
	*vmConfig = filepath.Join(dir, "vm-config")
	files := []string{in.base, in.vm.key, *vmConfig}
	for _, f := range packer.PayloadFiles {
		files = append(files, filepath.Join(in.payload, f))
	}
	for _, p := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return packer.PlanInfo{}, err
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return packer.PlanInfo{}, err
		}
	}
	return packer.Plan(ctx, packerConfig(o, in))
}
