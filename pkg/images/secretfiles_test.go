package images_test

import (
	"strings"
	"testing"

	packerfiles "github.com/flatcar-capo/flatcar-capo/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// The packer method's install-images.sh makes the secret-holding files root-only after its copy:
// it must name the paths Node.Files writes them to.
func TestInstallImagesKeepsSecretFilesRootOnly(t *testing.T) {
	script, err := packerfiles.FS.ReadFile("scripts/install-images.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{node.InRoot(node.ProxyEnvFile), node.InRoot(node.ContainerdAuthDropIn)} {
		if !strings.Contains(string(script), "/"+p+" ") && !strings.Contains(string(script), "/"+p+";") {
			t.Errorf("install-images.sh does not make /%s root-only", p)
		}
	}
	files, err := images.Node{HTTPSProxy: "http://u:p@proxy.example:3128", Auth: []images.HostAuth{{Host: "m.example", Username: "u", Password: "p"}}}.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if (f.Path == node.InRoot(node.ProxyEnvFile) || f.Path == node.InRoot(node.ContainerdAuthDropIn)) && f.Mode != 0o600 {
			t.Errorf("%s: mode %o, want 0600", f.Path, f.Mode)
		}
	}
}
