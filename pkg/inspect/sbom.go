package inspect

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"path"
	"path/filepath"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/epoch"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/sbom"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// binDirs are where a node image keeps its Kubernetes binaries (the Packer method,
// image-builder), hashed for the SBOM of an image built elsewhere.
var binDirs = []string{node.BinDir, node.CNIBinDir}

// archNames maps systemd's architecture names to Flatcar's board names.
var archNames = map[string]string{"x86-64": "amd64", "arm64": "arm64"}

// SBOM is the inventory of what the image holds, read from the image alone (for images built
// elsewhere, or to check one against its build's SBOM): the Flatcar version of its os-release,
// the image file's sha512, every sysext stored in ROOT (sha512), every file in /opt/bin and
// /opt/cni/bin (sha256) and the preloaded container images. tool is flatcar-capo's version.
func SBOM(img *disk.Image, r *Report, tool string) (sbom.Inventory, error) {
	inv := sbom.Inventory{Tool: tool, Subject: sbom.Subject{File: filepath.Base(img.Path)}}
	if t, ok, err := epoch.Get(); ok && err == nil {
		inv.Time = t
	}
	sum, _, err := digest.SHA512(img.Path)
	if err != nil {
		return inv, err
	}
	inv.Subject.SHA512 = sum
	if h := r.Extensions.Host; h.ID == "flatcar" && h.VersionID != "" {
		inv.Flatcar = sbom.Flatcar{Version: h.VersionID, Arch: archNames[h.Architecture], File: filepath.Base(img.Path), SHA512: sum}
	}
	for _, im := range r.Containerd.Images {
		inv.Images = append(inv.Images, sbom.Image{Ref: im.Name, Digest: im.Digest, Platform: im.Platform})
	}
	parts, err := img.Partitions()
	if err != nil {
		return inv, err
	}
	root, ok := disk.Find(parts, "ROOT")
	if !ok {
		return inv, nil
	}
	fsys, err := openExt4(img, root)
	if err != nil {
		return inv, nil // the report says why ROOT is unreadable; the SBOM lists what was found
	}
	for _, x := range r.Extensions.Stored {
		s, err := hashIn(fsys, x.Path, sha512.New())
		if err != nil {
			return inv, err
		}
		name := path.Base(x.Path)
		inv.Sysexts = append(inv.Sysexts, sbom.Sysext{File: name, Version: sysext.KubernetesFileVersion(name), SHA512: s, Path: x.Path})
	}
	for _, dir := range binDirs {
		ents, err := readDir(fsys, dir)
		if err != nil {
			continue // no such directory: nothing installed there
		}
		for _, e := range ents {
			if e.kind != "file" {
				continue
			}
			p := path.Join(dir, e.name)
			s, err := hashIn(fsys, p, sha256.New())
			if err != nil {
				return inv, err
			}
			inv.Files = append(inv.Files, sbom.File{Name: e.name, SHA256: s, Path: p})
		}
	}
	return inv, nil
}

func hashIn(fsys *disk.FS, p string, h hash.Hash) (string, error) {
	ra, size, err := fsys.ReaderAt(disk.FSName(p))
	if err != nil {
		return "", fmt.Errorf("ROOT %s: %w", p, err)
	}
	if _, err := io.Copy(h, io.NewSectionReader(ra, 0, size)); err != nil {
		return "", fmt.Errorf("ROOT %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
