package cli_test

import (
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
)

// manifests --image-repository sets kubeadm's imageRepository in the control plane's
// clusterConfiguration, the names `build --image-repository` preloaded; a bad value is exit 2.
func TestManifestsImageRepository(t *testing.T) {
	r := testutil.Run(t, "manifests", "--image-name", "img", "--kubernetes-version", "v1.33.4", "--image-repository", "registry.example:5000/k8s").MustSucceed(t)
	i := strings.Index(r.Stdout, "clusterConfiguration:\n")
	if i < 0 || !strings.HasPrefix(strings.TrimLeft(r.Stdout[i+len("clusterConfiguration:\n"):], " "), "imageRepository: registry.example:5000/k8s\n") {
		t.Fatalf("no imageRepository under clusterConfiguration:\n%s", r.Stdout)
	}
	if strings.Count(r.Stdout, "imageRepository:") != strings.Count(r.Stdout, "clusterConfiguration:") {
		t.Error("not every clusterConfiguration got the imageRepository")
	}
	testutil.Run(t, "manifests", "--image-name", "img", "--kubernetes-version", "v1.33.4", "--image-repository", "https://registry.example/k8s").MustFail(t, 2, "--image-repository")
}
