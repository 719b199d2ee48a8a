// Package capitest runs the real Cluster API management side on 127.0.0.1 for tests: etcd and
// kube-apiserver (scripts/install-kubernetes.sh's build), each provider's CRDs and admission and
// conversion webhooks, and the CAPI core, CABPK, KCP, CAPO and ORC managers as plain processes
// (scripts/install-capi.sh's build from the Go module proxy), with neither cert-manager nor
// clusterctl: so the real webhooks, not our reading of them, judge what `manifests` renders.
package capitest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Pairing is a CAPI release and the CAPO release run beside it.
type Pairing struct{ CAPI, CAPO string }

func (p Pairing) String() string { return "capi-" + p.CAPI + "+capo-" + p.CAPO }

// Pairings are the ones users run, as scripts/install-capi.sh builds them: CAPO v0.14.7's tested
// one (its go.mod pins CAPI v1.12.10) and the newest CAPI the Go module proxy serves.
var Pairings = []Pairing{{CAPI: "v1.12.10", CAPO: "v0.14.7"}, {CAPI: "v1.14.2", CAPO: "v0.14.7"}}

// orcVersion is the ORC whose Image CRD is installed beside CAPO (--image-ref orc; CAPO's
// controllers watch ORC Images). CAPO v0.14.7's e2e tests install ORC v2.4.0.
const orcVersion = "v2.4.0"

// The lock and output of scripts/install-capi.sh, in the cache's capi/.
const (
	buildLock = ".build.lock"
	buildLog  = "build.log"
)

// crdsOnly asks buildDirs for CAPO's and ORC's manifests only (Options.InfrastructureCRDs).
const crdsOnly = "capo-crds"

// dirs are scripts/install-capi.sh's outputs for a pairing.
type dirs struct{ CAPI, CAPO, ORC string }

// buildDirs returns the managers and manifests of providers in p, waiting (by its lock, at most
// an hour) for a scripts/install-capi.sh still running; it skips the test (fails it in strict
// mode) when they are missing after that.
func buildDirs(t testing.TB, p Pairing, providers []string) dirs {
	t.Helper()
	top := testutil.InstallCache()
	d := dirs{CAPI: filepath.Join(top, "capi", p.CAPI), CAPO: filepath.Join(top, "capo", p.CAPO), ORC: filepath.Join(top, "orc", orcVersion)}
	need := []string{filepath.Join(d.CAPI, ".manifests")} // the core's CRDs, always installed
	for _, pr := range providers {
		if pr == crdsOnly {
			need = append(need, filepath.Join(d.CAPO, ".manifests"), filepath.Join(d.ORC, ".manifests"))
		} else if pr == ORC {
			need = append(need, filepath.Join(d.ORC, "orc-manager"), filepath.Join(d.ORC, ".manifests"))
		} else if pr == Infrastructure {
			need = append(need, filepath.Join(d.CAPO, "capo-manager"), filepath.Join(d.CAPO, ".manifests"), filepath.Join(d.ORC, ".manifests"))
		} else {
			need = append(need, filepath.Join(d.CAPI, pr+"-manager"))
		}
	}
	missing := func() error {
		for _, f := range need {
			if _, err := os.Stat(f); err != nil {
				return err
			}
		}
		return nil
	}
	testutil.WaitForScript(t, "scripts/install-capi.sh", filepath.Join(top, "capi", buildLock), filepath.Join(top, "capi", buildLog),
		func() bool { return missing() == nil })
	testutil.RequireEnv(t, missing(), "the CAPI "+p.CAPI+" and CAPO "+p.CAPO+" managers built from the Go module proxy (run scripts/install-capi.sh; ORC_MANAGER=1 builds ORC's manager too)")
	return d
}
