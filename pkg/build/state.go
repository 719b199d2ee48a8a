package build

import (
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// State bag keys. A step reads what earlier steps put and adds its own; the value types are
// given here so method steps written elsewhere (step_sysext*.go) can rely on them.
const (
	KeyOptions  = "options"  // *Options (validated)
	KeyRelease  = "release"  // release.Release, resolved (Version is a number)
	KeyWorkDir  = "workDir"  // string: private build directory (0700), removed at the end
	KeyBase     = "base"     // *BaseImage: the verified download or --base-image (never modified)
	KeyWork     = "work"     // string: sparse raw copy of the base image in WorkDir
	KeyK8s      = "k8s"      // *kubernetes.Set: verified downloads in the cache
	KeyPayload  = "payload"  // string: directory handed to the guest (bin/, *.tgz, versions.env)
	KeySSHKey   = "sshKey"   // string: private key file of the build user (0600, in WorkDir)
	KeySSHUser  = "sshUser"  // string
	KeyIgnition = "ignition" // string: Ignition file for fw_cfg (--base qemu)
	KeyDrive    = "drive"    // string: config-2 ISO (--base openstack)
	KeyRaw      = "raw"      // string: raw image the method produced; the OEM step edits it
	KeyArtifact = "artifact" // string: the final qcow2 in OutputDir
	KeyRecord   = "record"   // *Record, filled by every step
	KeyReused   = "reused"   // bool: a finished artifact matched; later steps do nothing
	KeyError    = "error"    // error: why a step halted
	KeyLogFile  = "logFile"  // string: the method's full log (packer's PACKER_LOG), named in failures
)

// halt records err in the bag and stops the run; Run returns it.
func halt(state multistep.StateBag, err error) multistep.StepAction {
	state.Put(KeyError, err)
	return multistep.ActionHalt
}

func options(state multistep.StateBag) *Options { return state.Get(KeyOptions).(*Options) }
func record(state multistep.StateBag) *Record   { return state.Get(KeyRecord).(*Record) }

func getString(state multistep.StateBag, key string) string {
	s, _ := state.Get(key).(string)
	return s
}

// Reused reports whether the build found a matching finished artifact.
func Reused(state multistep.StateBag) bool {
	r, _ := state.Get(KeyReused).(bool)
	return r
}
