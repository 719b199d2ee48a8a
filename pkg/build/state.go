package build

import (
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// State bag keys, every one of them, with the type of its value: a step reads what earlier
// steps put and adds its own.
const (
	KeyOptions  = "options"  // *Options (validated)
	KeyRecord   = "record"   // *Record, filled by every step
	KeyStart    = "start"    // time.Time: when the build started; the record's seconds count from it
	KeyNote     = "note"     // string: what a step says on its progress line (reset per step)
	KeyError    = "error"    // error: why a step halted
	KeyRelease  = "release"  // release.Release, resolved (Version is a number)
	KeyWorkDir  = "workDir"  // string: private build directory (0700), removed at the end
	KeyBase     = "base"     // string: the verified download or --base-image (never modified)
	KeyWork     = "work"     // string: sparse raw copy of the base image in WorkDir
	KeyK8s      = "k8s"      // *kubernetes.Set: verified downloads in the cache
	KeyReused   = "reused"   // bool: a finished artifact matched; later steps do nothing
	KeyRaw      = "raw"      // string: raw image the method produced; the OEM step edits it
	KeyArtifact = "artifact" // string: the final qcow2 in OutputDir
	KeyRecorded = "recorded" // bool: the build record is on disk
	// KeyArtifactSHA512 is the artifact's size and sha512 as the qcow2 step wrote it (Artifact).
	KeyArtifactSHA512 = "artifactSHA512"
	// KeyExtraArtifacts are further files a method leaves next to the artifact ([]Artifact, with
	// their sha512), such as the sysext method's .raw; the record lists them too.
	KeyExtraArtifacts = "extraArtifacts"
	KeyLogFile        = "logFile"  // string: the method's full log (packer's PACKER_LOG), named in failures
	KeyLogMoved       = "logMoved" // string: the log's path inside the removed build directory, if it was moved

	// The packer method.
	KeyPackerTools = "packerTools" // *packer.Tools: what the preflight probed; the packer step builds with it
	KeyPayload     = "payload"     // string: directory handed to the guest (bin/, *.tgz, versions.env)
	KeySSHKey      = "sshKey"      // string: private key file of the build user (0600, in WorkDir)
	KeySSHUser     = "sshUser"     // string
	KeyIgnition    = "ignition"    // string: Ignition file for fw_cfg (--base qemu)
	KeyDrive       = "drive"       // string: config-2 ISO (--base openstack)

	// The sysext method.
	// KeySysextFiles maps each --sysext to its file and sha512 (map[string]sysextSource): URLs are
	// fetched and every file hashed before the reuse check, so reuse is keyed on what they hold
	// now, and stepSysext takes these.
	KeySysextFiles = "sysextFiles"
	KeySysexts     = "sysexts" // []Sysext: the sysexts to bake, set by stepSysext
	KeyImages      = "images"  // *ImagesPlan: the preloaded images, set by stepImages
	// KeyOverlay is the work copy of an overlay method (*workOverlay, workdisk.go): copy-on-write
	// over the base, set instead of KeyWork and KeyRaw; the steps after the work copy use it.
	KeyOverlay = "overlay"
)

// noCleanup is embedded by the steps that leave nothing behind to undo.
type noCleanup struct{}

func (noCleanup) Cleanup(multistep.StateBag) {}

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
