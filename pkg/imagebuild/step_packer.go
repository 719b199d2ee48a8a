package imagebuild

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// stepPacker boots the work copy under Packer + QEMU, provisions it with the payload and
// sysprep, and makes packer's raw disk the work file. Packer's ui lines are passed on condensed; its
// full log stays in the build directory and is named in every failure. Cancelling ctx sends
// packer SIGTERM and pkg/packer kills any QEMU left.
type stepPacker struct{ noCleanup }

func (*stepPacker) Name() string { return "packer" }

func (*stepPacker) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	in := packerInputs{workDir: keyWorkDir.get(state), base: keyWorkFile.get(state), vm: keyVM.get(state),
		payload: keyPayload.get(state), tools: keyTools.get(state)}
	if set := keyK8s.get(state); set != nil {
		in.kubernetes = &set.Options
	}
	cfg := packerConfig(o, in)
	if o.driver != nil {
		cfg.Driver = o.driver
	} else if cfg.Tools != nil { // the packer the preflight checked
		// Ctrl-C gives a command 10 s to clean up (pkg/cli): packer gets SIGTERM and, if it is
		// slower than stopGrace, SIGKILL of its group; pkg/packer then kills any QEMU left.
		cfg.Driver = &packer.ExecDriver{Packer: cfg.Tools.Packer, Grace: stopGrace}
	}
	keyLogFile.put(state, filepath.Join(cfg.WorkDir, "packer.log"))
	res, err := packer.Build(ctx, cfg)
	if res.LogFile != "" {
		keyLogFile.put(state, res.LogFile)
	}
	rec.Tools.Packer, rec.Tools.Accelerator = res.PackerVersion, res.Accelerator
	rec.Tools.PackerPath = filepath.Base(o.Packer)
	if err != nil {
		return halt(state, cmp.Or(ctx.Err(), err))
	}
	// Packer copies its disk without holes (copy_file_range on the work copy): punch the
	// all-zero clusters out again, or the artifact stores the whole virtual size.
	f, err := os.OpenFile(res.Image, os.O_RDWR, 0)
	if err != nil {
		return halt(state, fmt.Errorf("packer's disk: %w", err))
	}
	freed, err := vdisk.PunchZeros(ctx, f, 64<<10)
	f.Close()
	if err != nil {
		return halt(state, err)
	}
	setWorkFile(state, res.Image)
	note(state, "packer %s, accelerator %s; %s of zeros in its disk made holes again", res.PackerVersion, res.Accelerator, progress.Bytes(freed))
	return multistep.ActionContinue
}

// stopGrace is how long packer may take to stop after SIGTERM before its group is killed.
const stopGrace = 6 * time.Second

// packerInputs are what the packer build boots and hands the guest, made by the earlier steps
// (or, for a dry run's plan, placeholders).
type packerInputs struct {
	workDir    string
	base       string // the raw work copy QEMU boots
	vm         vmFiles
	payload    string
	kubernetes *kubernetes.Options // the versions the guest scripts get (nil: none)
	tools      *packer.Tools       // what the preflight probed (nil: probe again)
}

// packerConfig is the pkg/packer configuration of this build.
func packerConfig(o *Options, in packerInputs) packer.Config {
	vars := map[string]string{}
	if k := in.kubernetes; k != nil {
		vars["KUBERNETES_VERSION"] = k.Kubernetes
		vars["CRICTL_VERSION"] = k.Crictl
		vars["CNI_PLUGINS_VERSION"] = k.CNI
	}
	if o.KeepUpdates {
		vars["KEEP_UPDATES"] = "1"
	}
	return packer.Config{
		Tools:  in.tools,
		Packer: o.Packer, QEMUBinary: o.QEMUBinary, Accelerator: o.Accelerator,
		CPUs: o.CPUs, MemoryMiB: o.MemoryMiB, DiskSize: o.DiskSize,
		BaseImage: in.base,
		OutputDir: filepath.Join(in.workDir, "packer-output"), OutputName: "image.raw",
		WorkDir: filepath.Join(in.workDir, "packer"),
		SSHUser: in.vm.user, SSHPrivateKeyFile: in.vm.key,
		IgnitionFile: in.vm.ignition, ConfigDriveFile: in.vm.drive,
		Payload: in.payload, Vars: vars, UserScripts: o.Provision,
		Log: indented{o.Log, "  packer: "},
	}
}
