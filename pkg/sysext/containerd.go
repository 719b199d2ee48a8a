package sysext

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// The containerd sysext's name and places (Flatcar's sysext-bakery): it replaces Flatcar's
// built-in containerd-flatcar, which ContainerdMask (a link to /dev/null) keeps from merging.
const (
	ContainerdName = "containerd"
	// FlatcarContainerdName is Flatcar's own containerd sysext, masked when ours is baked.
	FlatcarContainerdName = "containerd-flatcar"
	// ContainerdVersionKey is the extension-release key holding the containerd version.
	ContainerdVersionKey = KubernetesVersionKey
)

var (
	// ContainerdLink is where systemd-sysext finds ours; ContainerdMask masks Flatcar's.
	ContainerdLink = node.ExtensionLink(ContainerdName)
	ContainerdMask = node.ExtensionLink(FlatcarContainerdName)
)

var (
	//go:embed units/containerd.service
	containerdService []byte
	//go:embed units/10-containerd-service.conf
	containerdUpholds []byte
	// FlatcarContainerdConfig is Flatcar's /usr/share/containerd/config.toml, which the
	// containerd sysext carries so that /etc/containerd/conf.d drop-ins keep working.
	//go:embed units/containerd-config.toml
	FlatcarContainerdConfig string
)

// The containerd sysext's files, node paths.
const (
	containerdUnit       = node.SysextUnitDir + "/" + node.Containerd
	ContainerdUpholds    = node.SysextUnitDir + "/multi-user.target.d/10-containerd-service.conf"
	containerdConfigFile = "/usr/share/containerd/config.toml"
)

// ContainerdFileName is the versioned image name, e.g. containerd-2.3.7-x86-64.raw (the bakery's).
func ContainerdFileName(version, arch string) (string, error) {
	a, err := Arch(arch)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s.raw", ContainerdName, version, a), nil
}

// ContainerdInput is what a containerd sysext is made of: containerd's verified release
// tarball (bin/containerd, ctr, containerd-shim-runc-v2, ...) and runc's static binary.
type ContainerdInput struct {
	Version, Runc    string // 2.3.7, v1.5.2
	Arch             string // amd64|arm64 or systemd's spelling
	Tarball, RuncBin string
	ReleaseID        string // _any (default) or flatcar
	Compression      string
	CompressionLevel int
	ModTime          time.Time
}

// ContainerdOwnFiles are the containerd sysext's files flatcar-capo itself carries (Flatcar's
// config, the unit, the upholds drop-in), as ContainerdSpec adds them: build's inputs key hashes them.
func ContainerdOwnFiles() []File {
	return []File{
		{Path: inImage(containerdConfigFile), Data: []byte(FlatcarContainerdConfig)},
		{Path: inImage(containerdUnit), Data: containerdService},
		{Path: inImage(ContainerdUpholds), Data: containerdUpholds},
	}
}

// ContainerdSpec is the bakery's layout: the tarball's bin/ in /usr/bin, runc as /usr/bin/runc,
// plus Flatcar's containerd.service, config.toml and an Upholds drop-in (the bakery ships its
// own config.toml without conf.d imports; Flatcar's keeps our drop-ins working).
func ContainerdSpec(in ContainerdInput) (Spec, error) {
	arch, err := Arch(in.Arch)
	if err != nil {
		return Spec{}, err
	}
	rel, err := extensionRelease(arch, in.ReleaseID, ContainerdVersionKey, in.Version)
	if err != nil {
		return Spec{}, err
	}
	if in.Tarball == "" || in.RuncBin == "" {
		return Spec{}, fmt.Errorf("the containerd tarball and runc are both needed")
	}
	files := append([]File{
		{Path: "usr", Archive: in.Tarball}, // bin/* lands in usr/bin
		{Path: inImage(node.SysextBinDir) + "/runc", Mode: 0o755, Source: in.RuncBin},
	}, ContainerdOwnFiles()...)
	return Spec{Name: ContainerdName, Release: rel, ReleaseOrder: []string{"ID", "SYSEXT_LEVEL", "ARCHITECTURE", "EXTENSION_RELOAD_MANAGER", ContainerdVersionKey},
		Files: files, Compression: in.Compression, CompressionLevel: in.CompressionLevel, ModTime: in.ModTime}, nil
}

// ContainerdInputFromSet maps verified downloads to the sysext's inputs (sysext create and build).
func ContainerdInputFromSet(set *containerd.Set) ContainerdInput {
	return ContainerdInput{Version: set.Options.Version, Runc: set.Options.Runc, Arch: set.Options.Arch,
		Tarball: set.Tarball.Path, RuncBin: set.Runc.Path}
}

// MakeContainerdOptions are `sysext create containerd`'s.
type MakeContainerdOptions struct {
	Image           CreateOptions // ReleaseID, Compression, Level (Kubernetes unused)
	Download        containerd.Options
	Network         httpx.Options
	OutputFile      string // default: ContainerdFileName in the current directory
	DefaultCacheDir func() (string, error)
	Log             io.Writer
}

// MakeContainerd checks o, downloads and verifies containerd and runc, and writes the
// containerd sysext. Every value is checked before the first download.
func MakeContainerd(ctx context.Context, o MakeContainerdOptions) (*Made, error) {
	image, dl := o.Image, o.Download
	image.Kubernetes = "-" // not asked for
	if err := image.Validate(); err != nil {
		return nil, err
	}
	var err error
	if dl.Arch, err = release.ParseArch(dl.Arch); err != nil {
		return nil, err
	}
	if err := dl.Validate(); err != nil {
		return nil, err
	}
	arch, err := Arch(dl.Arch)
	if err != nil {
		return nil, err
	}
	if err := o.Network.Validate(); err != nil {
		return nil, err
	}
	out := o.OutputFile
	if out == "" {
		out, _ = ContainerdFileName(dl.Version, arch)
	}
	if err := atomicfile.CheckPath(out); err != nil {
		return nil, err
	}
	if dl.CacheDir == "" && o.DefaultCacheDir != nil {
		if dl.CacheDir, err = o.DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	set, err := containerd.Download(ctx, httpx.New(o.Network), dl, o.Log)
	if err != nil {
		return nil, err
	}
	in := ContainerdInputFromSet(set)
	in.ReleaseID, in.Compression = image.ReleaseID, image.Compression
	if image.Compression == "gzip" {
		in.CompressionLevel = image.Level
	}
	spec, err := ContainerdSpec(in)
	if err != nil {
		return nil, err
	}
	return createAndHash(ctx, spec, out, dl.Version, arch)
}
