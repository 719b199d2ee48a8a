package build

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
// builds with what it found (KeyPackerTools).
func (packerMethod) Preflight(ctx context.Context, o *Options, state multistep.StateBag) (string, error) {
	t, err := packer.Probe(ctx, packer.Config{Packer: o.Packer, QEMUBinary: o.QEMUBinary, Accelerator: o.Accelerator, Driver: o.driver})
	if err != nil {
		return "", err
	}
	state.Put(KeyPackerTools, t)
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
// placeholder inputs in a throwaway directory: nothing boots and nothing of the build exists yet.
func packerPlan(ctx context.Context, o *Options) (packer.PlanInfo, error) {
	dir, err := os.MkdirTemp("", "flatcar-capo-plan-")
	if err != nil {
		return packer.PlanInfo{}, err
	}
	defer os.RemoveAll(dir)
	state := new(multistep.BasicStateBag)
	state.Put(KeyWorkDir, dir)
	state.Put(KeySSHUser, ignition.DefaultUser)
	vmKey := KeyIgnition
	if o.Base == "openstack" {
		vmKey = KeyDrive
	}
	for key, name := range map[string]string{KeyWork: "work.raw", KeySSHKey: "build_ed25519", vmKey: "vm-config"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			return packer.PlanInfo{}, err
		}
		state.Put(key, p)
	}
	payload := filepath.Join(dir, "payload")
	for _, f := range packer.PayloadFiles {
		p := filepath.Join(payload, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return packer.PlanInfo{}, err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return packer.PlanInfo{}, err
		}
	}
	state.Put(KeyPayload, payload)
	cfg := packerConfig(o, state)
	cfg.Vars["KUBERNETES_VERSION"] = o.Kubernetes.Kubernetes
	cfg.Vars["CRICTL_VERSION"] = o.Kubernetes.Crictl
	cfg.Vars["CNI_PLUGINS_VERSION"] = o.Kubernetes.CNI
	return packer.Plan(ctx, cfg)
}
