package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	packerfiles "github.com/flatcar-capo/flatcar-capo/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// nodeFile is one file flatcar-capo itself defines that a build bakes into the image (or runs in
// the build VM to make it): Inputs.NodeFiles hashes them, so a flatcar-capo whose kubeadm
// drop-in, units or scripts changed builds anew instead of reusing an artifact made with the old
// ones. The user's own inputs (--sysext, --provision, the CA ...) are keyed by their own fields.
type nodeFile struct {
	Path    string // where it goes, prefixed with what carries it (ROOT, a sysext, packer/)
	Mode    fs.FileMode
	Content []byte // a symlink's target
}

// nodeFilesDigest is Inputs.NodeFiles for o.
func nodeFilesDigest(o *Options) (string, error) {
	files, err := nodeFiles(o)
	if err != nil {
		return "", err
	}
	return digestNodeFiles(files), nil
}

// nodeFiles are the files every method writes (the node settings', the images' and
// containerd's settings, as stepBakeRoot and the packer payload take them) and the method's own
// (Method.NodeFiles), each read from where the build takes it.
func nodeFiles(o *Options) ([]nodeFile, error) {
	files, err := entryFiles("ROOT", o.Node.entries())
	if err != nil {
		return nil, err
	}
	im, err := imagesFiles(o)
	if err != nil {
		return nil, err
	}
	files = append(files, im...)
	if m, ok := methods[o.Method]; ok {
		own, err := m.NodeFiles(o)
		if err != nil {
			return nil, err
		}
		files = append(files, own...)
	}
	return files, nil
}

// imagesFiles are pkg/images' node files made for a sample image: the registry settings, the
// import script and unit and their drop-ins as images.Node.Files writes them (which images and
// settings are the user's is keyed by Inputs.Images).
func imagesFiles(o *Options) ([]nodeFile, error) {
	n := images.Node{}
	if !o.Images.NoPreload {
		const pause = "registry.k8s.io/pause:3.10"
		n = images.Node{Kubernetes: "v0.0.0", Kubeadm: []string{pause}, Sandbox: pause,
			Images: []images.Image{{Name: pause, Digest: "sha256:" + strings.Repeat("0", 64), Platform: "linux/amd64"}}}
	}
	fl, err := n.Files(0)
	if err != nil {
		return nil, err
	}
	var out []nodeFile
	for _, f := range fl {
		out = append(out, nodeFile{Path: path.Join("ROOT", f.Path), Mode: f.Mode, Content: f.Content})
	}
	return out, nil
}

// entryFiles reads the ROOT entries the bake writes (small files made in memory).
func entryFiles(prefix string, entries []rootfs.Entry) ([]nodeFile, error) {
	var out []nodeFile
	for _, e := range entries {
		f := nodeFile{Path: path.Join(prefix, e.Path), Mode: e.Mode, Content: []byte(e.Target)}
		if e.IsRegular() {
			r, err := e.Open()
			if err != nil {
				return nil, err
			}
			f.Content, err = io.ReadAll(r)
			r.Close()
			if err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// sysextFiles are a sysext's own files under sysext/NAME.
func sysextFiles(name string, files []sysext.File) []nodeFile {
	var out []nodeFile
	for _, f := range files {
		out = append(out, nodeFile{Path: path.Join("sysext", name, f.Path), Mode: f.Mode, Content: f.Data})
	}
	return out
}

// NodeFiles of the sysext method: the ROOT layout's own entries (kubeadm's drop-in, the update
// masks, the containerd-flatcar mask) as stepBakeRoot makes them, the Kubernetes sysext's units
// when the build makes it, the containerd sysext's with --containerd-version.
func (sysextMethod) NodeFiles(o *Options) ([]nodeFile, error) {
	layout := rootfs.Layout{KeepUpdates: o.KeepUpdates}
	if o.Containerd.Version != "" || len(o.Sysext) > 0 { // a containerd sysext masks Flatcar's
		layout.Masked = []string{sysext.FlatcarContainerdName}
	}
	entries, err := layout.Entries()
	if err != nil {
		return nil, err
	}
	files, err := entryFiles("ROOT", entries)
	if err != nil {
		return nil, err
	}
	if len(o.Sysext) == 0 {
		files = append(files, sysextFiles(sysext.KubernetesName, sysext.KubernetesOwnFiles())...)
	}
	return append(files, containerdFiles(o)...), nil
}

// NodeFiles of the packer method: the template and the guest scripts (packer/, as pkg/packer
// renders them), the NODE_* environment they get (node.Env), and the containerd sysext's units
// with --containerd-version.
func (packerMethod) NodeFiles(o *Options) ([]nodeFile, error) {
	var files []nodeFile
	err := fs.WalkDir(packerfiles.FS, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := packerfiles.FS.ReadFile(p)
		files = append(files, nodeFile{Path: path.Join("packer", p), Content: b})
		return err
	})
	if err != nil {
		return nil, err
	}
	var env strings.Builder
	e := node.Env()
	for _, k := range slices.Sorted(maps.Keys(e)) {
		fmt.Fprintf(&env, "%s=%s\n", k, e[k])
	}
	files = append(files, nodeFile{Path: "packer/environment", Content: []byte(env.String())})
	return append(files, containerdFiles(o)...), nil
}

// containerdFiles are the containerd sysext's own files when --containerd-version makes one.
func containerdFiles(o *Options) []nodeFile {
	if o.Containerd.Version == "" {
		return nil
	}
	return sysextFiles(sysext.ContainerdName, sysext.ContainerdOwnFiles())
}

// digestNodeFiles is "sha256:" and the hash of the files in path order: each one's path, mode
// and length, then its content.
func digestNodeFiles(files []nodeFile) string {
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b nodeFile) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%q %o %d\n", f.Path, uint32(f.Mode), len(f.Content))
		h.Write(f.Content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
