package capo

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/templates"
)

// Flatcar's /usr is read-only: kube-controller-manager's static pod mounts its flex-volume dir
// with DirectoryOrCreate, so under /usr (the default) the pod never starts. Every template points
// it where the image's kubelet has it (node.VolumePluginDir), and gives kubeadm's control-plane
// health check 20 minutes, not 4 (a slow cloud's first boot; under TCG it took longer).
func TestTemplatesKeepVolumePluginsOffUsr(t *testing.T) {
	names, err := fs.Glob(templates.FS, "*.yaml")
	if err != nil || len(names) != 3 {
		t.Fatalf("templates: %v %v", names, err)
	}
	for _, name := range names {
		raw, err := fs.ReadFile(templates.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(stripComments(raw))
		timeout := "controlPlaneComponentHealthCheckSeconds: 1200"
		if !strings.Contains(name, "v1beta2") {
			timeout = "timeoutForControlPlane: 20m0s"
		}
		if !strings.Contains(doc, "flex-volume-plugin-dir") || !strings.Contains(doc, node.VolumePluginDir) {
			t.Errorf("%s: the controller manager's flex-volume-plugin-dir is not %s", name, node.VolumePluginDir)
		}
		if !strings.Contains(doc, timeout) {
			t.Errorf("%s: no %q: kubeadm's 4-minute default fails slow first boots", name, timeout)
		}
	}
}
