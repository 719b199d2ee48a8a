package build

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// stepPacker boots the work copy under Packer + QEMU, provisions it with the payload and
// sysprep, and leaves the raw result as KeyRaw. Packer's ui lines are passed on condensed; its
// full log stays in the build directory and is named in every failure. Cancelling ctx sends
// packer SIGTERM and pkg/packer kills any QEMU left.
type stepPacker struct{ noCleanup }

func (*stepPacker) Name() string { return "packer" }

func (*stepPacker) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), record(state)
	cfg := packerConfig(o, state)
	if o.driver != nil {
		cfg.Driver = o.driver
	} else if cfg.Tools != nil { // the packer the preflight checked
		// Ctrl-C gives a command 10 s to clean up (pkg/cli): packer gets SIGTERM and, if it is
		// slower than stopGrace, SIGKILL of its group; pkg/packer then kills any QEMU left.
		cfg.Driver = &packer.ExecDriver{Packer: cfg.Tools.Packer, Grace: stopGrace}
	}
	state.Put(KeyLogFile, filepath.Join(cfg.WorkDir, "packer.log"))
	res, err := packer.Build(ctx, cfg)
	if res.LogFile != "" {
		state.Put(KeyLogFile, res.LogFile)
	}
	rec.Tools.Packer, rec.Tools.Accelerator = res.PackerVersion, res.Accelerator
	rec.Tools.PackerPath = o.Packer
	if err != nil {
		if ctx.Err() != nil {
			return halt(state, ctx.Err())
		}
		return halt(state, err)
	}
	// Packer copies its disk without holes (copy_file_range on the work copy): punch the
	// all-zero clusters out again, or the artifact stores the whole virtual size.
	freed, err := sparsify(ctx, res.Image)
	if err != nil {
		return halt(state, err)
	}
	state.Put(KeyRaw, res.Image)
	note(state, "packer %s, accelerator %s; %s of zeros in its disk made holes again", res.PackerVersion, res.Accelerator, progress.Bytes(freed))
	return multistep.ActionContinue
}

func sparsify(ctx context.Context, image string) (int64, error) {
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("packer's disk: %w", err)
	}
	defer f.Close()
	return vdisk.PunchZeros(ctx, f, 64<<10)
}

// stopGrace is how long packer may take to stop after SIGTERM before its group is killed.
const stopGrace = 6 * time.Second

// packerConfig is the pkg/packer configuration of this build.
func packerConfig(o *Options, state multistep.StateBag) packer.Config {
	dir := getString(state, KeyWorkDir)
	vars := map[string]string{}
	if set, ok := state.Get(KeyK8s).(*kubernetes.Set); ok {
		vars["KUBERNETES_VERSION"] = set.Options.Kubernetes
		vars["CRICTL_VERSION"] = set.Options.Crictl
		vars["CNI_PLUGINS_VERSION"] = set.Options.CNI
	}
	if o.KeepUpdates {
		vars["KEEP_UPDATES"] = "1"
	}
	tools, _ := state.Get(KeyPackerTools).(*packer.Tools)
	return packer.Config{
		Tools:  tools,
		Packer: o.Packer, QEMUBinary: o.QEMUBinary, Accelerator: o.Accelerator,
		CPUs: o.CPUs, MemoryMiB: o.MemoryMiB, DiskSize: o.DiskSize,
		BaseImage: getString(state, KeyWork),
		OutputDir: filepath.Join(dir, "packer-output"), OutputName: "image.raw",
		WorkDir: filepath.Join(dir, "packer"),
		SSHUser: getString(state, KeySSHUser), SSHPrivateKeyFile: getString(state, KeySSHKey),
		IgnitionFile: getString(state, KeyIgnition), ConfigDriveFile: getString(state, KeyDrive),
		Payload: getString(state, KeyPayload), Vars: vars, UserScripts: o.Provision,
		Log: func(line string) { fmt.Fprintf(o.Log, "  packer: %s\n", strings.TrimSpace(line)) },
	}
}
