package images

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// PinnedLabel marks the preloaded images: kubelet's image GC keeps these. Where the node's files
// go is pkg/node's.
const PinnedLabel = "io.cri-containerd.pinned=pinned"

// File is one file of the node's settings.
type File struct {
	Path    string // in ROOT, without the leading slash (node.InRoot)
	Mode    fs.FileMode
	Content []byte
}

// Node is what a node needs besides the archive: the containerd settings and, with images,
// the import unit and its ordering before kubelet and kubeadm.
type Node struct {
	Images     []Image  // preloaded (may be empty: settings only)
	Kubeadm    []string // containerd names of what kubeadm listed (inspect checks they are preloaded)
	Kubernetes string   // the version kubeadm listed them for
	Sandbox    string   // kubeadm's pause ("" keeps containerd's default)
	Registries []string
	Mirrors    Mirrors
	MirrorOnly bool       // --registry-mirror-only: no upstream fallback in hosts.toml
	Auth       []HostAuth // --node-registry-auth: logins for the node's CRI (a 0600 drop-in)
	CAFile     string
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string
}

// ListEntry is one line of images.json.
type ListEntry struct {
	Name     string `json:"name"`
	Digest   string `json:"digest"`
	Platform string `json:"platform"`
	Size     int64  `json:"size"`
}

// List is images.json: what the image carries, for inspect and the import script.
type List struct {
	Kubernetes string      `json:"kubernetesVersion"`
	Kubeadm    []string    `json:"kubeadm"` // what kubeadm listed for it
	Archive    string      `json:"archive"`
	Size       int64       `json:"archiveBytes"`
	Images     []ListEntry `json:"images"`
}

// Files returns the node's files (archiveSize is the archive's bytes, 0 without images).
func (n Node) Files(archiveSize int64) ([]File, error) {
	var out []File
	add := func(p string, mode fs.FileMode, content string) { // p: a node path
		out = append(out, File{Path: node.InRoot(p), Mode: mode, Content: []byte(content)})
	}
	var ca []byte
	if n.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(n.CAFile); err != nil {
			return nil, fmt.Errorf("--registry-ca: %w", err)
		}
		out = append(out, File{Path: node.InRoot(node.RegistryCA), Mode: 0o644, Content: ca})
	}
	hosts, err := n.hostsFiles(ca)
	if err != nil {
		return nil, err
	}
	out = append(out, hosts...)
	// Flatcar's config.toml is version 2 and imports conf.d/*.toml; a drop-in's table may replace
	// the base one's, so the runc SystemdCgroup setting is restated here.
	var c strings.Builder
	c.WriteString("# flatcar-capo: registry settings in certs.d, kubeadm's sandbox image (preloaded)\nversion = 2\n\n")
	c.WriteString("[plugins.\"io.containerd.grpc.v1.cri\"]\n")
	if n.Sandbox != "" {
		v, err := TOMLString(n.Sandbox)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&c, "  sandbox_image = %s\n", v)
	}
	c.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"" + node.ContainerdCertsDir + "\"\n")
	c.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n")
	c.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n")
	add(node.ContainerdConfDropIn, 0o644, c.String())
	if len(n.Auth) > 0 {
		f, err := authDropIn(n.Auth)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	proxy, err := n.proxyFiles()
	if err != nil {
		return nil, err
	}
	out = append(out, proxy...)
	if len(n.Images) == 0 {
		return out, nil
	}
	list := List{Kubernetes: n.Kubernetes, Kubeadm: append([]string{}, n.Kubeadm...), Archive: node.ImagesArchive, Size: archiveSize}
	for _, im := range n.Images {
		list.Images = append(list.Images, ListEntry{Name: im.Name, Digest: im.Digest, Platform: im.Platform, Size: im.Size})
	}
	lj, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	out = append(out, File{Path: node.InRoot(node.ImagesList), Mode: 0o644, Content: append(lj, '\n')})
	// Each line: the name, then the repo@digest reference CRI reports as the image's repo digest
	// (a pull through CRI records both; ctr import only the name).
	var names2 []string
	for _, im := range n.Images {
		line := im.Name
		if r, err := ParseRef(im.Name); err == nil && r.Digest == "" {
			line += " " + r.Registry() + "/" + r.Repo.RepositoryStr() + "@" + im.Digest
		}
		names2 = append(names2, line)
	}
	add(node.ImagesNames, 0o644, strings.Join(names2, "\n")+"\n")
	add(node.ImportScript, 0o755, importScript)
	add(node.ImportUnit, 0o644, importUnit)
	out = append(out, File{Path: node.InRoot(node.ImportWants), Mode: fs.ModeSymlink | 0o777, Content: []byte(node.ImportUnit)})
	for _, u := range []string{node.Kubelet, node.Kubeadm} {
		add(node.ImagesDropIn(u), 0o644,
			"# the preloaded images are in containerd before this starts\n[Unit]\nWants="+node.ImportUnitName+"\nAfter="+node.ImportUnitName+"\n")
	}
	return out, nil
}

// The import unit: after containerd, before kubelet and kubeadm (their drop-ins order them
// too, as kubelet may be started by the Kubernetes sysext's Upholds= in another transaction).
const importUnit = `[Unit]
Description=Import the preloaded container images into containerd (flatcar-capo)
Requires=containerd.service
After=containerd.service
Before=kubelet.service kubeadm.service
ConditionPathExists=` + node.ImagesArchive + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + node.ImportScript + `

[Install]
WantedBy=multi-user.target
`

// importScript imports the archive into containerd's k8s.io namespace, pins every image (and
// marks it CRI-managed), then removes the archive so no image is stored twice.
const importScript = `#!/bin/sh
# flatcar-capo: import the preloaded images, pin them, remove the archive (first boot only).
set -eu
dir=` + node.PreloadDir + `
archive=` + node.ImagesArchive + `
PATH=/usr/bin:/usr/sbin:/bin:/sbin:` + node.BinDir + `
# containerd may still be starting (or come from a sysext merged a moment ago).
i=0
until ctr version >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -le 120 ] || { echo "containerd does not answer on its socket" >&2; exit 1; }
  sleep 1
done
# containerd 2.x imports through its transfer service unless --local (1.x has no such flag).
local=
if ctr images import --help 2>&1 | grep -q -- '--local'; then local=--local; fi
ctr -n k8s.io images import $local "$archive"
while read -r name digestref; do
  [ -n "$name" ] || continue
  ctr -n k8s.io images label "$name" ` + PinnedLabel + ` io.cri-containerd.image=managed >/dev/null
  if [ -n "$digestref" ]; then
    ctr -n k8s.io images tag --force "$name" "$digestref" >/dev/null
    ctr -n k8s.io images label "$digestref" ` + PinnedLabel + ` io.cri-containerd.image=managed >/dev/null
  fi
done < "$dir/names"
rm -f "$archive"
echo "imported and pinned $(grep -c . "$dir/names") images"
`
