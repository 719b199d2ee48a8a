package inspect

import (
	"archive/tar"
	"encoding/json"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Containerd is the node's container images and containerd settings found in ROOT: the images
// a build preloaded (images.json, checked against the archive's own index.json), the conf.d
// drop-ins and the certs.d registry hosts. Nothing from the image is executed.
type Containerd struct {
	Images       []PreloadedImage `json:"images"`
	Archive      string           `json:"archive"` // the archive's path, "" when absent (imported on first boot)
	ArchiveBytes int64            `json:"archiveBytes"`
	ImportUnit   bool             `json:"importUnit"` // the import unit is enabled
	Kubernetes   string           `json:"kubernetesVersion"`
	Kubeadm      []string         `json:"kubeadm"` // what kubeadm listed for that version at build time
	Missing      []string         `json:"missing"` // of those, not in the archive
	DropIns      []string         `json:"dropIns"` // /etc/containerd/conf.d/*.toml
	SandboxImage string           `json:"sandboxImage"`
	ConfigPath   string           `json:"configPath"` // CRI registry config_path
	Registries   []RegistryHosts  `json:"registries"`
	Proxy        NodeProxy        `json:"proxy"`     // /etc/flatcar-capo/proxy.env, passwords masked
	AuthHosts    []string         `json:"authHosts"` // hosts the CRI has a login for (--node-registry-auth); never the login
}

// NodeProxy is the proxy of the node's containerd and kubelet.
type NodeProxy struct {
	HTTPProxy   string `json:"httpProxy"`
	HTTPSProxy  string `json:"httpsProxy"`
	NoProxy     string `json:"noProxy"`
	HasPassword bool   `json:"hasPassword"` // the image carries a proxy password
}

// PreloadedImage is one image in the archive.
type PreloadedImage struct {
	Name      string `json:"name"`
	Digest    string `json:"digest"`
	Platform  string `json:"platform"`
	Size      int64  `json:"size"`
	InArchive bool   `json:"inArchive"`
}

// RegistryHosts is one certs.d/<registry>/hosts.toml.
type RegistryHosts struct {
	Registry string   `json:"registry"` // _default for every registry
	Server   string   `json:"server"`
	Mirrors  []string `json:"mirrors"` // in the order containerd tries them, before the server
	CA       bool     `json:"ca"`
	// OverridePath: a path-prefixed mirror (Harbor project) is among them.
	OverridePath bool `json:"overridePath"`
}

var (
	reServer   = regexp.MustCompile(`(?m)^\s*server\s*=\s*"([^"]*)"`)
	reHost     = regexp.MustCompile(`(?m)^\s*\[host\."([^"]*)"\]`)
	reCA       = regexp.MustCompile(`(?m)^\s*ca\s*=`)
	reSandbox  = regexp.MustCompile(`(?m)^\s*sandbox_image\s*=\s*"([^"]*)"`)
	reCfgPath  = regexp.MustCompile(`(?m)^\s*config_path\s*=\s*"([^"]*)"`)
	reAuth     = regexp.MustCompile(`(?m)^\s*\[plugins\."io\.containerd\.grpc\.v1\.cri"\.registry\.configs\."([^"]*)"\.auth\]`)
	reOverride = regexp.MustCompile(`(?m)^\s*override_path\s*=\s*true`)
	reEnv      = regexp.MustCompile(`(?m)^(HTTP_PROXY|HTTPS_PROXY|NO_PROXY)="((?:[^"\\]|\\.)*)"`)
)

// readContainerd fills r.Containerd from ROOT (fsys may be nil: ROOT unreadable).
func (r *Report) readContainerd(fsys *disk.FS) {
	c := &r.Containerd
	if fsys == nil {
		return
	}
	if ents, err := readDir(fsys, node.ContainerdConfDir); err == nil {
		for _, e := range ents {
			if e.kind != "file" || !strings.HasSuffix(e.name, ".toml") {
				continue
			}
			p := path.Join(node.ContainerdConfDir, e.name)
			c.DropIns = append(c.DropIns, p)
			data := readSmall(fsys, p)
			if m := reSandbox.FindAllStringSubmatch(data, -1); m != nil {
				c.SandboxImage = m[len(m)-1][1] // later drop-ins win
			}
			if m := reCfgPath.FindAllStringSubmatch(data, -1); m != nil {
				c.ConfigPath = m[len(m)-1][1]
			}
			for _, m := range reAuth.FindAllStringSubmatch(data, -1) {
				c.AuthHosts = append(c.AuthHosts, m[1])
			}
		}
	}
	if ents, err := readDir(fsys, node.ContainerdCertsDir); err == nil {
		for _, e := range ents {
			if e.kind != "directory" {
				continue
			}
			data := readSmall(fsys, node.RegistryHosts(e.name))
			if data == "" {
				continue
			}
			h := RegistryHosts{Registry: e.name, Mirrors: []string{}, CA: reCA.MatchString(data), OverridePath: reOverride.MatchString(data)}
			if m := reServer.FindStringSubmatch(data); m != nil {
				h.Server = m[1]
			}
			for _, m := range reHost.FindAllStringSubmatch(data, -1) {
				h.Mirrors = append(h.Mirrors, m[1])
			}
			c.Registries = append(c.Registries, h)
		}
	}
	if data := readSmall(fsys, node.ProxyEnvFile); data != "" {
		p := &c.Proxy
		for _, m := range reEnv.FindAllStringSubmatch(data, -1) {
			v := strings.NewReplacer(`\\`, `\`, `\"`, `"`, "\\`", "`", `\$`, `$`).Replace(m[2])
			p.HasPassword = p.HasPassword || m[1] != "NO_PROXY" && images.ProxyHasPassword(v)
			switch m[1] {
			case "HTTP_PROXY":
				p.HTTPProxy = redact.URL(v)
			case "HTTPS_PROXY":
				p.HTTPSProxy = redact.URL(v)
			case "NO_PROXY":
				p.NoProxy = v
			}
		}
	}
	k, err := entryKind(fsys, node.ImportWants)
	c.ImportUnit = err == nil && k == "symlink"
	var list images.List
	if data := readSmall(fsys, node.ImagesList); data == "" || json.Unmarshal([]byte(data), &list) != nil {
		return
	}
	c.Kubernetes = list.Kubernetes
	if list.Kubeadm != nil {
		c.Kubeadm = list.Kubeadm
	}
	inArchive := map[string]string{}
	if k, err := entryKind(fsys, node.ImagesArchive); err == nil && k == "file" {
		c.Archive = node.ImagesArchive
		inArchive, c.ArchiveBytes = archiveIndex(fsys, c.Archive)
	}
	for _, im := range list.Images {
		d, ok := inArchive[im.Name]
		c.Images = append(c.Images, PreloadedImage{Name: im.Name, Digest: im.Digest, Platform: im.Platform, Size: im.Size, InArchive: ok && d == im.Digest})
	}
	if c.Archive != "" {
		for _, k := range c.Kubeadm {
			if _, ok := inArchive[k]; !ok {
				c.Missing = append(c.Missing, k)
			}
		}
	}
	sort.Strings(c.Missing)
}

// archiveIndex reads the OCI archive's index.json (among its first entries): name -> digest.
func archiveIndex(fsys *disk.FS, p string) (map[string]string, int64) {
	out := map[string]string{}
	ra, size, err := fsys.ReaderAt(disk.FSName(p))
	if err != nil {
		return out, 0
	}
	tr := tar.NewReader(io.NewSectionReader(ra, 0, size))
	for i := 0; i < 4; i++ {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name != "index.json" || h.Size > 4<<20 {
			continue
		}
		var idx struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if json.NewDecoder(tr).Decode(&idx) == nil {
			for _, m := range idx.Manifests {
				if n := m.Annotations[images.AnnotationImageName]; n != "" {
					out[n] = m.Digest
				}
			}
		}
		break
	}
	return out, size
}

// readSmall returns a file of at most 1 MiB, "" when it is missing or larger.
func readSmall(fsys *disk.FS, p string) string {
	if k, err := entryKind(fsys, p); err != nil || k != "file" {
		return ""
	}
	ra, size, err := fsys.ReaderAt(disk.FSName(p))
	if err != nil || size > 1<<20 {
		return ""
	}
	b := make([]byte, size)
	if _, err := ra.ReadAt(b, 0); err != nil && err != io.EOF {
		return ""
	}
	return string(b)
}

// Rules: a kubeadm image missing from the archive makes kubeadm pull it at join time, which an
// air-gapped node cannot.
func ruleImages(r *Report) {
	c := r.Containerd
	if len(c.Missing) > 0 {
		r.add(levelWarning, "images-missing", "kubeadm %s needs %s, not among the preloaded images: a node without registry access cannot pull them; fix: build again without --no-preload-images (or add them with --image)",
			c.Kubernetes, strings.Join(c.Missing, ", "))
	}
}
