package inspect

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/epoch"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
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
// What cannot be read fails it (nothing is left out silently), a file larger than any binary or
// sysext can be is refused rather than hashed for hours, and ctx stops the hashing.
func SBOM(ctx context.Context, img *disk.Image, r *Report, tool string) (sbom.Inventory, error) {
	inv := sbom.Inventory{Tool: tool, Subject: sbom.Subject{File: filepath.Base(img.Path)}}
	if t, ok, err := epoch.Get(); ok && err == nil {
		inv.Time = t
	}
	sums, _, err := digest.FilesContext(ctx, img.Path, sha512.New())
	if err != nil {
		return inv, err
	}
	sum := sums[0]
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
		return inv, fmt.Errorf("the SBOM cannot list what ROOT holds: %w", err)
	}
	for _, x := range r.Extensions.Stored {
		s, err := hashIn(ctx, fsys, x.Path, sha512.New(), maxSysext)
		if err != nil {
			return inv, err
		}
		name := path.Base(x.Path)
		inv.Sysexts = append(inv.Sysexts, sbom.Sysext{File: name, Version: sysext.KubernetesFileVersion(name), SHA512: s, Path: x.Path})
	}
	for _, dir := range binDirs {
		ents, err := readDir(fsys, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no such directory: nothing installed there
		}
		if err != nil {
			return inv, fmt.Errorf("the SBOM cannot list %s in ROOT (nothing is left out silently): %w; the ext4 reader cannot read some entries (file names of 248-255 bytes are one): rename or remove it, or inspect without --sbom-file", dir, err)
		}
		for _, e := range ents {
			if e.kind != "file" {
				continue
			}
			p := path.Join(dir, e.name)
			s, err := hashIn(ctx, fsys, p, sha256.New(), maxBinary)
			if err != nil {
				return inv, err
			}
			inv.Files = append(inv.Files, sbom.File{Name: e.name, SHA256: s, Path: p})
		}
	}
	return inv, nil
}

// The most bytes a file the SBOM hashes can sensibly hold: a binary in /opt/bin (kubelet is
// ~80 MiB) and a stored sysext (--sysext takes at most 16 GiB). A larger one (a sparse file of
// a TiB) is refused, not read for hours.
const (
	maxBinary = 2 << 30
	maxSysext = 16 << 30
)

func hashIn(ctx context.Context, fsys *disk.FS, p string, h hash.Hash, limit int64) (string, error) {
	ra, size, err := fsys.ReaderAt(disk.FSName(p))
	if err != nil {
		return "", fmt.Errorf("ROOT %s: %w", p, err)
	}
	if size > limit {
		return "", fmt.Errorf("ROOT %s is %s, more than such a file can sensibly be (at most %s): not hashed for the SBOM; this image is not one flatcar-capo built, remove the file or inspect without --sbom-file",
			p, infile.Size(size), infile.Size(limit))
	}
	sums, _, err := digest.Reader(ctx, "ROOT "+p, io.NewSectionReader(ra, 0, size), h)
	if err != nil {
		return "", err
	}
	return sums[0], nil
}
