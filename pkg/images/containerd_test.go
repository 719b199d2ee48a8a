package images_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// How containerd 2.x merges a conf.d drop-in into Flatcar's config (version 2, imports
// conf.d/*.toml), read from `containerd config dump` of the real containerd 2.1.5: our drop-in
// sets the CRI registry config_path and kubeadm's pause, and SystemdCgroup stays true. A second
// drop-in that only sets sandbox_image shows that a partial table is merged key by key into the
// base's, not put in its place (ours restates the runc options anyway, for containerd 1.x).
func TestContainerdMergesDropIn(t *testing.T) {
	for _, v := range registrytest.ContainerdMatrix {
		t.Run("containerd-"+v, func(t *testing.T) { testContainerdMergesDropIn(t, v) })
	}
}

func testContainerdMergesDropIn(t *testing.T, version string) {
	bin := filepath.Join(registrytest.ContainerdDirOf(t, version), "containerd")
	dump := func(t *testing.T, dropIn string) string {
		t.Helper()
		dir := t.TempDir()
		confd := filepath.Join(dir, "conf.d")
		os.MkdirAll(confd, 0o755)
		cfg := filepath.Join(dir, "config.toml")
		os.WriteFile(cfg, []byte(registrytest.FlatcarContainerdConfig(confd)), 0o644)
		os.WriteFile(filepath.Join(confd, "10-flatcar-capo.toml"), []byte(dropIn), 0o644)
		return testutil.MustRun(t, bin, "--config", cfg, "config", "dump")
	}
	files, err := images.Node{Sandbox: "registry.k8s.io/pause:3.10"}.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	var ours string
	for _, f := range files {
		if f.Path == node.InRoot(node.ContainerdConfDropIn) {
			ours = string(f.Content)
		}
	}
	got := dump(t, ours)
	// 2.x migrates the merged version-2 config to its own (single-quoted TOML strings): version 3
	// up to 2.2, version 4 from 2.3.
	if !regexp.MustCompile(`(?m)^version = [34]$`).MatchString(got) {
		t.Errorf("merged config is not migrated to version 3 or 4:\n%s", got)
	}
	for _, w := range []string{"SystemdCgroup = true", "config_path = '/etc/containerd/certs.d'", "sandbox = 'registry.k8s.io/pause:3.10'", "runtime_type = 'io.containerd.runc.v2'"} {
		if !strings.Contains(got, w) {
			t.Errorf("merged config lacks %q:\n%s", w, got)
		}
	}
	// What 2.x does with a partial table: merged key by key into the base's (not replaced), so
	// the base's runc options survive a drop-in that does not mention them.
	partial := dump(t, "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.10\"\n")
	if !strings.Contains(partial, "SystemdCgroup = true") || !strings.Contains(partial, "sandbox = 'registry.k8s.io/pause:3.10'") {
		t.Errorf("a partial [plugins.\"io.containerd.grpc.v1.cri\"] drop-in replaced the base's table:\n%s", partial)
	}
}
