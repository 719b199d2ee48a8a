package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/configdrive"
	"github.com/flatcar-capo/flatcar-capo/pkg/ignition"
)

// stepVMConfig makes the build VM's Ignition config for a build user with a fresh ed25519 key
// (0600, in the build directory only, deleted with it). A qemu base reads it through QEMU
// fw_cfg; an openstack base from a config-2 drive this step writes.
type stepVMConfig struct{ noCleanup }

// vmFiles are the build VM's user, its private key, and its config: an Ignition file for fw_cfg
// (--base qemu) or a config-2 ISO (--base openstack).
type vmFiles struct{ user, key, ignition, drive string }

func (*stepVMConfig) Name() string { return "vm config" }

func (*stepVMConfig) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	dir := filepath.Join(keyWorkDir.get(state), "vm")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return halt(state, err)
	}
	key, ign, err := ignition.Write(dir, ignition.DefaultUser)
	if err != nil {
		return halt(state, err)
	}
	vm := vmFiles{user: ignition.DefaultUser, key: key.PrivateKeyFile, ignition: ign}
	rec.Tools.Ignition, rec.Tools.BuildVMConfig = ignition.SpecVersion, "fw_cfg"
	how := "through fw_cfg"
	if o.Base == "openstack" {
		raw, err := os.ReadFile(ign)
		if err != nil {
			return halt(state, err)
		}
		drive := filepath.Join(dir, "config-2.iso")
		if err := configdrive.Write(drive, raw, configdrive.MetaData{UUID: "00000000-0000-4000-8000-00000000f1a7",
			Name: "flatcar-capo-build", Hostname: "flatcar-capo-build"}); err != nil {
			return halt(state, fmt.Errorf("config drive: %w", err))
		}
		vm.ignition, vm.drive = "", drive
		rec.Tools.BuildVMConfig, how = "config-2", "on a config-2 drive"
	}
	keyVM.put(state, vm)
	note(state, "Ignition %s for user %s %s", ignition.SpecVersion, ignition.DefaultUser, how)
	return multistep.ActionContinue
}
