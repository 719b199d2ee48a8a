package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/capo"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
)

// Flavors of `flatcar-capo manifests --flavor` that fit each method's image.
var flavors = map[string]string{MethodPacker: capo.FlavorBaked, MethodSysext: capo.FlavorSysextBaked}

// newRecord is the record of a build of o, before any step has run.
func newRecord(o *Options) *record.Record {
	return &record.Record{Method: o.Method, OEM: o.OEM, Arch: o.Release.Arch, Channel: o.Release.Channel,
		KubernetesVersion: o.Kubernetes.Kubernetes, Tools: record.Tools{FlatcarCapo: o.ToolVersion},
		Downloads: []record.Download{}, Artifacts: []record.Artifact{}, Steps: []record.StepTiming{}, CarriesSecrets: o.Images.SecretKinds()}
}

// setManifests names the flavor that fits the image and the command that renders CAPO
// manifests for it.
func setManifests(r *record.Record, o *Options) {
	r.Flavor = flavors[o.Method]
	r.Manifests = fmt.Sprintf("flatcar-capo manifests --flavor %s --image-name %s --kubernetes-version %s", r.Flavor, o.ImageName, o.Kubernetes.Kubernetes)
	if o.Images.Repository != "" {
		r.Manifests += " --image-repository " + o.Images.Repository // kubeadm asks for the preloaded names
	}
}

// stepRecord hashes every artifact (sha512) and writes <artifact>.build.json; from then on the
// artifact is finished and a re-run with the same inputs reuses it.
type stepRecord struct{ noCleanup }

func (*stepRecord) Name() string      { return "record" }
func (*stepRecord) RunsOnReuse() bool { return true }

func (*stepRecord) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	artifact := keyArtifact.get(state)
	setManifests(rec, o)
	if start := keyStart.get(state); !start.IsZero() {
		rec.Seconds = time.Since(start).Seconds() // this run's wall time so far; the record is written now
	}
	if !keyReused.get(state) {
		a := keySHA512.get(state)
		if a.File == "" { // the qcow2 step hashes what it writes, except compressed output
			sum, n, err := digest.SHA512(artifact)
			if err != nil {
				return halt(state, err)
			}
			a = record.Artifact{File: filepath.Base(artifact), Bytes: n, SHA512: sum}
		}
		rec.Artifacts = append(append(rec.Artifacts[:0], a), keyExtra.get(state)...) // the extra files were hashed when made
	}
	reused := keyReused.get(state)
	if !reused { // a reused artifact keeps its SBOM (stepReuse checked it is the record's)
		if err := writeSBOM(rec, artifact, keyEpoch.get(state)); err != nil {
			return halt(state, err)
		}
	}
	if err := rec.Write(artifact); err != nil {
		if !reused {
			os.Remove(sbom.Path(artifact)) // the artifact stays half-built and is removed: so is its SBOM
		}
		return halt(state, err)
	}
	keyRecorded.put(state, true)
	note(state, "%s", artifact+".build.json")
	return multistep.ActionContinue
}
