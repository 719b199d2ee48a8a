// Package occmtest gives the CAPO proof the OpenStack cloud controller manager a user runs in a
// workload cluster (k8s.io/cloud-provider-openstack, built from the Go module proxy by
// scripts/install-occm.sh): its image, remade from that binary as upstream's Dockerfile lays it
// out and pushed to a test registry under the DaemonSet's own ref (for `flatcar-capo build
// --image`), and the manifests a user applies (Manifests).
package occmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// occmVersion is the cloud-provider-openstack release scripts/install-occm.sh builds: the one whose
// minor matches the workload cluster's Kubernetes (v1.34), as its docs ask.
const occmVersion = "v1.34.1"

// binaryName is the manager's file name, in the build's directory and (under /bin) in the image.
const binaryName = "openstack-cloud-controller-manager"

// The upstream manifests, as the module ships them (manifests/controller-manager/).
const (
	rolesFile    = "manifests/controller-manager/cloud-controller-manager-roles.yaml"
	bindingsFile = "manifests/controller-manager/cloud-controller-manager-role-bindings.yaml"
	daemonSet    = "manifests/controller-manager/openstack-cloud-controller-manager-ds.yaml"
)

// Dir returns scripts/install-occm.sh's build of occmVersion (the binary and the manifests beside
// it), waiting for a build still running; it skips the test (fails it in strict mode) when
// there is none. Only make capo-proof builds it (FLATCAR_CAPO_CAPO_PROOF=1): make test skips
// the tests that need it, so its machines need no cloud controller manager build.
func Dir(t testing.TB) string {
	t.Helper()
	testutil.RequireOptIn(t, "FLATCAR_CAPO_CAPO_PROOF", "the OpenStack cloud controller manager (make capo-proof builds it)")
	top := filepath.Join(testutil.InstallCache(), "occm")
	dir := filepath.Join(top, occmVersion)
	missing := func() error {
		for _, f := range []string{binaryName, ".manifests"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
		return nil
	}
	testutil.WaitForScript(t, "scripts/install-occm.sh", filepath.Join(top, ".build.lock"), "its caller's output (make capo-proof)",
		func() bool { return missing() == nil })
	testutil.RequireEnv(t, missing(), "the OpenStack cloud controller manager "+occmVersion+" built from the Go module proxy (run scripts/install-occm.sh)")
	return dir
}

// Push makes the manager's image from dir's binary as upstream's Dockerfile does (the binary
// at /bin/openstack-cloud-controller-manager, CA certificates in /etc/ssl/certs, the binary as
// CMD and no ENTRYPOINT: the DaemonSet's args name the binary first) and pushes it to reg under
// the ref the upstream DaemonSet names (registry.k8s.io/provider-os/...). It returns that ref:
// `flatcar-capo build --image REF --registry-mirror registry.k8s.io=https://<reg.Host>
// --registry-ca <reg.CAFile>` (DOCKER_CONFIG=<reg.DockerConfig>) preloads it from reg, and the
// node's containerd then has it under the name the DaemonSet asks for.
func Push(ctx context.Context, reg *registrytest.Registry, dir string) (string, error) {
	ref, err := imageRef(dir)
	if err != nil {
		return "", err
	}
	files := map[string]string{
		"/bin/" + binaryName:                 filepath.Join(dir, binaryName),
		"/etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt",
	}
	if _, err := reg.PushFiles(ctx, ref, files, registrytest.Image{Cmd: []string{"/bin/" + binaryName}}); err != nil {
		return "", fmt.Errorf("occmtest: %w", err)
	}
	return ref, nil
}

// imageLine is the DaemonSet container's image.
var imageLine = regexp.MustCompile(`(?m)^\s+image:\s*(\S+)\s*$`)

// imageRef is the image the upstream DaemonSet in dir runs.
func imageRef(dir string) (string, error) {
	ds, err := os.ReadFile(filepath.Join(dir, daemonSet))
	if err != nil {
		return "", fmt.Errorf("occmtest: %w (run scripts/install-occm.sh --force)", err)
	}
	m := imageLine.FindAllSubmatch(ds, -1)
	if len(m) != 1 {
		return "", fmt.Errorf("occmtest: %d image lines in %s, want 1", len(m), daemonSet)
	}
	ref := strings.Trim(string(m[0][1]), `"'`)
	if !strings.HasSuffix(ref, ":"+occmVersion) {
		return "", fmt.Errorf("occmtest: %s runs %s, not %s", daemonSet, ref, occmVersion)
	}
	return ref, nil
}
