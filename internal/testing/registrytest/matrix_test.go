package registrytest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
)

// scripts/install-deps.sh builds every containerd of the matrix, so STRICT runs skip none.
func TestInstallDepsBuildsTheContainerdMatrix(t *testing.T) {
	b, err := os.ReadFile("../../../scripts/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range registrytest.ContainerdMatrix {
		if v != registrytest.ContainerdVersion && !strings.Contains(string(b), " "+v) {
			t.Errorf("scripts/install-deps.sh does not build containerd %s (install-containerd.sh %s)", v, v)
		}
	}
}
