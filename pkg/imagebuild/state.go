package imagebuild

import (
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// key is a state bag key with the type of its value: a step reads what earlier steps put and
// adds its own, and an absent value reads as T's zero.
type key[T any] string

func (k key[T]) get(state multistep.StateBag) T    { v, _ := state.Get(string(k)).(T); return v }
func (k key[T]) put(state multistep.StateBag, v T) { state.Put(string(k), v) }
func (k key[T]) remove(state multistep.StateBag)   { state.Remove(string(k)) }

// The keys, every one of them (the record's below).
const (
	keyOptions    key[*Options]        = "options"    // validated
	keyStart      key[time.Time]       = "start"      // when the build started; the record's seconds count from it
	keyNote       key[string]          = "note"       // what a step says on its progress line (reset per step)
	keyError      key[error]           = "error"      // why a step halted
	keyRelease    key[release.Release] = "release"    // resolved (Version is a number)
	keyWorkDir    key[string]          = "workDir"    // private build directory (0700), removed at the end
	keyBase       key[string]          = "base"       // the verified download or --base-image (never modified)
	keyK8s        key[*kubernetes.Set] = "k8s"        // verified downloads in the cache
	keyContainerd key[*containerd.Set] = "containerd" // --containerd-version's verified downloads
	keyReused     key[bool]            = "reused"     // a finished artifact matched; later steps do nothing
	keyArtifact   key[string]          = "artifact"
	keyRecorded   key[bool]            = "recorded"    // the build record is on disk
	keyEpoch      key[time.Time]       = "epoch"       // what the build writes as the time (epoch.go); zero: the wall clock
	keyLogFile    key[string]          = "logFile"     // the method's full log (packer's PACKER_LOG), named in failures
	keyLogMoved   key[string]          = "logMoved"    // the log's path inside the removed build directory, if it was moved
	keyTools      key[*packer.Tools]   = "packerTools" // what the packer preflight probed; the packer step builds with it
	keyVM         key[vmFiles]         = "vm"          // the build VM's user, key and config (stepVMConfig)
	keyPayload    key[string]          = "payload"     // directory handed to the guest (bin/, *.tgz, versions.env)
	keySysexts    key[[]Sysext]        = "sysexts"     // the sysexts to bake, set by stepSysext
	keyImages     key[*imagesPlan]     = "images"      // the preloaded images, set by stepImages
	// keySysextFiles maps each --sysext to its file and sha512: URLs are fetched and every file
	// hashed before the reuse check, so reuse is keyed on what they hold now, and stepSysext takes these.
	keySysextFiles key[map[string]sysextSource] = "sysextFiles"
	// The work image (workimage.go): the raw file the method edits as a file (QEMU, truncate),
	// and the open image every later step reads and edits.
	keyWorkFile  key[string]     = "workFile"
	keyWorkImage key[*workImage] = "workImage"
)

// The record's keys: what the build writes down, and the dry run's plan instead.
const (
	keyRecord key[*record.Record]    = "record"         // filled by every step
	keyPlan   key[*Plan]             = "plan"           // --dry-run's plan (stepPlan)
	keySHA512 key[record.Artifact]   = "artifactSHA512" // the artifact's size and sha512 as the qcow2 step wrote it
	keyExtra  key[[]record.Artifact] = "extraArtifacts" // further files next to the artifact (the sysext method's .raw), hashed
)

// noCleanup is embedded by the steps that leave nothing behind to undo.
type noCleanup struct{}

func (noCleanup) Cleanup(multistep.StateBag) {}

// halt records err in the bag and stops the run; Run returns it.
func halt(state multistep.StateBag, err error) multistep.StepAction {
	keyError.put(state, err)
	return multistep.ActionHalt
}

func options(state multistep.StateBag) *Options           { return keyOptions.get(state) }
func buildRecord(state multistep.StateBag) *record.Record { return keyRecord.get(state) }

// buildTime is the time of what the build makes: its epoch, else the wall clock (whole seconds).
func buildTime(state multistep.StateBag) time.Time {
	if t := keyEpoch.get(state); !t.IsZero() {
		return t
	}
	return time.Now().Truncate(time.Second)
}
