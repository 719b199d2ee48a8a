package images_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// The node's import script (the preload's first boot) run against each real containerd of
// registrytest.ContainerdMatrix: it imports the archive `build` writes, removes it, and every
// preloaded image is in the CRI under kubeadm's name and its repo digest, pinned (the CRI's
// `pinned`, which the kubelet's image GC skips) and kept by crictl's prune of unused images.
func TestContainerdImportsAndPinsPreload(t *testing.T) {
	testutil.RequireRoot(t, "runs containerd")
	reg, pushed := fixture(t)
	cache := t.TempDir()
	res, err := images.Pull(context.Background(), refs(t, pushed.Refs...), opts(reg, cache))
	if err != nil {
		t.Fatal(err)
	}
	arch, err := images.NewArchive(cache, res.Images)
	if err != nil {
		t.Fatal(err)
	}
	files, err := images.Node{Images: res.Images, Kubernetes: k8s}.Files(arch.Size)
	if err != nil {
		t.Fatal(err)
	}
	var script, names string
	for _, f := range files {
		switch f.Path {
		case node.InRoot(node.ImportScript):
			script = string(f.Content)
		case node.InRoot(node.ImagesNames):
			names = string(f.Content)
		}
	}
	for _, v := range registrytest.ContainerdMatrix {
		t.Run("containerd-"+v, func(t *testing.T) {
			c := nodeContainerd(t, v, images.Node{})
			pre := filepath.Join(c.Dir, node.InRoot(node.PreloadDir))
			os.MkdirAll(pre, 0o755)
			os.WriteFile(filepath.Join(pre, "names"), []byte(names), 0o644)
			out, err := os.Create(filepath.Join(pre, "images.tar"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := arch.WriteTo(context.Background(), out); err != nil {
				t.Fatal(err)
			}
			out.Close()
			// The node's script with the node's paths moved into the test's directory and this
			// containerd's ctr first on PATH (ctr reads CONTAINERD_ADDRESS).
			s := strings.ReplaceAll(script, node.PreloadDir, pre)
			s = strings.Replace(s, "\nPATH=", "\nPATH="+c.Bin()+":", 1)
			cmd := exec.Command("sh", "-c", s)
			cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+c.Socket)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("import script: %v\n%s\n%s", err, b, c.Log())
			}
			if _, err := os.Stat(filepath.Join(pre, "images.tar")); err == nil {
				t.Error("the archive is still there after the import")
			}
			listed := criImages(t, c)
			for _, want := range pushed.Refs {
				im, ok := listed[want]
				if !ok {
					t.Errorf("%s is not in the CRI after the import: %v", want, listed)
					continue
				}
				if !im.Pinned {
					t.Errorf("%s is not pinned: the kubelet's image GC would remove it", want)
				}
				if len(im.RepoDigests) == 0 {
					t.Errorf("%s has no repo digest in the CRI", want)
				}
			}
			if out, err := c.Crictl("rmi", "--prune"); err != nil {
				t.Fatalf("crictl rmi --prune: %v\n%s", err, out)
			}
			if after := criImages(t, c); len(after) != len(listed) {
				t.Errorf("the prune of unused images removed preloaded ones: %d before, %d after", len(listed), len(after))
			}
		})
	}
}

type criImage struct {
	RepoTags, RepoDigests []string
	Pinned                bool
}

// criImages is `crictl images -o json` by tag.
func criImages(t *testing.T, c *registrytest.Containerd) map[string]criImage {
	t.Helper()
	out, err := c.Crictl("images", "-o", "json")
	if err != nil {
		t.Fatalf("crictl images: %v\n%s", err, out)
	}
	var list struct{ Images []criImage }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("crictl images -o json: %v\n%s", err, out)
	}
	m := map[string]criImage{}
	for _, im := range list.Images {
		for _, tag := range im.RepoTags {
			m[tag] = im
		}
	}
	return m
}
