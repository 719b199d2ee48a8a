package sysext

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// The Kubernetes sysext's conventional name and places (Flatcar's sysext-bakery, CAPO).
const (
	KubernetesName = "kubernetes"
	// KubernetesLink is the link systemd-sysext finds; its name must match extension-release.kubernetes.
	KubernetesLink = node.ExtensionsDir + "/" + KubernetesName + ".raw"
	// KubernetesDir holds the versioned images (storage only; not a search path).
	KubernetesDir = node.ExtensionsStore + "/" + KubernetesName
)

var (
	//go:embed units/kubelet.service
	kubeletService []byte
	//go:embed units/10-kubeadm.conf
	kubeadmDropIn []byte
	//go:embed units/10-kubelet-service.conf
	upholdsDropIn []byte
)

// KubernetesInput names the files a Kubernetes sysext is made of. The binaries come from the
// Kubernetes release (dl.k8s.io/release/<v>/bin/linux/<arch>/), checked by the caller.
type KubernetesInput struct {
	Version                   string // v1.33.4
	Arch                      string // amd64|arm64 (or systemd's x86-64); empty: this machine's
	Kubelet, Kubeadm, Kubectl string
	// CNIPlugins is a directory of plugin binaries or the cni-plugins-linux-<arch>-<v>.tgz
	// release archive; optional (then kubelet.service does not copy plugins to /opt/cni/bin).
	CNIPlugins string
	// Crictl is the crictl binary or its crictl-<v>-linux-<arch>.tar.gz; optional.
	Crictl string
	// ReleaseID is "_any" (default, as the bakery writes) or "flatcar" (ID=flatcar, SYSEXT_LEVEL=1.0).
	ReleaseID        string
	Compression      string    // gzip (default) or zstd
	CompressionLevel int       // gzip level 1-9; 0: DefaultGzipLevel
	ModTime          time.Time // see Spec.ModTime
}

// CreateOptions are sysext create's choices of the image, checked before any download.
type CreateOptions struct {
	Kubernetes  string // the version asked for (exact, a minor or stable): required
	ReleaseID   string // _any or flatcar
	Compression string // gzip or zstd
	Level       int    // gzip's level
	LevelGiven  bool   // Level was asked for (else DefaultGzipLevel; zstd takes none)
}

// Validate checks o; its errors wrap errs.ErrInvalid.
func (o CreateOptions) Validate() error {
	if o.Kubernetes == "" {
		return errs.Invalidf("--kubernetes-version is required, e.g. --kubernetes-version stable, 1.36 or %s", kubernetes.ExampleVersion)
	}
	if o.ReleaseID != "_any" && o.ReleaseID != flatcarID {
		return errs.Invalidf("--release-id must be _any or flatcar, not %q", o.ReleaseID)
	}
	if o.Compression != "zstd" && o.Compression != "gzip" {
		return errs.Invalidf("--compression must be gzip or zstd, not %q (the kernel rejects go-diskfs' xz and lz4)", o.Compression)
	}
	if o.LevelGiven && (o.Compression != "gzip" || o.Level < 1 || o.Level > 9) {
		return errs.Invalidf("--compression-level is gzip's, 1 (fastest) to 9 (smallest); got %d with --compression %s", o.Level, o.Compression)
	}
	return nil
}

var versionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ValidVersion checks a Kubernetes version as the release server spells it (v1.33.4).
func ValidVersion(v string) error {
	if !versionPattern.MatchString(v) {
		return errs.Invalidf("invalid Kubernetes version %q: use the release tag, e.g. v1.33.4", v)
	}
	return nil
}

// KubernetesFileName is the versioned image name, e.g. kubernetes-v1.33.4-x86-64.raw.
func KubernetesFileName(version, arch string) (string, error) {
	if err := ValidVersion(version); err != nil {
		return "", err
	}
	a, err := Arch(arch)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s.raw", KubernetesName, version, a), nil
}

// KubernetesVersionKey is the extension-release key holding the Kubernetes version.
const KubernetesVersionKey = "SYSEXT_VERSION_ID"

// KubernetesSpec is the bakery's layout for in: the three binaries in /usr/bin, CNI plugins in
// /usr/local/bin/cni (copied to /opt/cni/bin by kubelet.service), crictl, kubelet.service with
// kubeadm's drop-in, and multi-user.target upholding kubelet.
func KubernetesSpec(in KubernetesInput) (Spec, error) {
	if err := ValidVersion(in.Version); err != nil {
		return Spec{}, err
	}
	arch, err := Arch(in.Arch)
	if err != nil {
		return Spec{}, err
	}
	// SYSEXT_VERSION_ID is the extension's own version (os-release(5)); VERSION_ID would name the
	// host OS version to match. A build with --sysext reads the Kubernetes version from it.
	rel, err := extensionRelease(arch, in.ReleaseID, KubernetesVersionKey, in.Version)
	if err != nil {
		return Spec{}, err
	}
	var files []File
	for _, b := range []struct{ name, src string }{{"kubelet", in.Kubelet}, {"kubeadm", in.Kubeadm}, {"kubectl", in.Kubectl}} {
		if b.src == "" {
			return Spec{}, fmt.Errorf("the %s binary is missing (needed in %s/%s)", b.name, inImage(node.SysextBinDir), b.name)
		}
		files = append(files, File{Path: inImage(node.SysextBinDir) + "/" + b.name, Mode: 0o755, Source: b.src})
	}
	unit := kubeletService
	if in.CNIPlugins != "" {
		cni, err := cniFiles(in.CNIPlugins)
		if err != nil {
			return Spec{}, err
		}
		files = append(files, cni...)
	} else { // kubelet.service copies no plugins
		var kept []string
		for _, l := range strings.SplitAfter(string(unit), "\n") {
			if !strings.Contains(l, node.SysextCNIDir+"/") {
				kept = append(kept, l)
			}
		}
		unit = []byte(strings.Join(kept, ""))
	}
	if in.Crictl != "" {
		f := File{Path: inImage(node.SysextBinDir) + "/crictl", Mode: 0o755, Source: in.Crictl}
		if isTarGz(in.Crictl) {
			f = File{Path: inImage(node.SysextBinDir) + "/crictl", Mode: 0o755, Archive: in.Crictl, Member: "crictl"}
		}
		files = append(files, f)
	}
	own := KubernetesOwnFiles()
	own[0].Data = unit // without the plugin copy when no plugins are given
	files = append(files, own...)
	return Spec{
		Name: KubernetesName, Release: rel, ReleaseOrder: []string{"ID", "SYSEXT_LEVEL", "ARCHITECTURE", "EXTENSION_RELOAD_MANAGER", KubernetesVersionKey},
		Files: files, Compression: in.Compression, CompressionLevel: in.CompressionLevel, ModTime: in.ModTime,
	}, nil
}

// KubernetesOwnFiles are the Kubernetes sysext's files flatcar-capo itself defines (the kubelet
// unit first, kubeadm's drop-in, the upholds drop-in), as KubernetesSpec adds them: build's
// inputs key hashes them, so a changed unit makes a new image.
func KubernetesOwnFiles() []File {
	return []File{
		{Path: inImage(node.SysextKubeletUnit), Data: kubeletService},
		{Path: inImage(node.SysextKubeletDropIn), Data: kubeadmDropIn},
		{Path: inImage(node.SysextUpholds), Data: upholdsDropIn},
	}
}

// CreateKubernetes writes the Kubernetes sysext for in to out (see KubernetesSpec and Create).
func CreateKubernetes(ctx context.Context, in KubernetesInput, out string) (*Info, error) {
	spec, err := KubernetesSpec(in)
	if err != nil {
		return nil, err
	}
	return Create(ctx, spec, out)
}

func cniFiles(src string) ([]File, error) {
	if isTarGz(src) {
		return []File{{Path: inImage(node.SysextCNIDir), Archive: src}}, nil
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("CNI plugins: %w (give a directory of plugin binaries or the cni-plugins .tgz)", err)
	}
	var files []File
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		files = append(files, File{Path: inImage(node.SysextCNIDir) + "/" + e.Name(), Mode: 0o755, Source: src + "/" + e.Name()})
	}
	if len(files) == 0 {
		return nil, errors.New("CNI plugins: " + src + " holds no files")
	}
	return files, nil
}

// inImage is a node path as a path inside the sysext image (relative).
func inImage(p string) string { return strings.TrimPrefix(p, "/") }

func isTarGz(p string) bool { return strings.HasSuffix(p, ".tgz") || strings.HasSuffix(p, ".tar.gz") }

// extensionRelease is an extension-release of ours: ID=_any as the bakery writes (or
// ID=flatcar with Flatcar's SYSEXT_LEVEL), the architecture, reload manager, and the extension's
// own version under versionKey.
func extensionRelease(arch, releaseID, versionKey, version string) (Release, error) {
	rel := Release{"ID": "_any", "ARCHITECTURE": arch, "EXTENSION_RELOAD_MANAGER": "1", versionKey: version}
	switch releaseID {
	case "", "_any":
	case flatcarID:
		rel["ID"], rel["SYSEXT_LEVEL"] = flatcarID, flatcarSysextLevel
	default:
		return nil, fmt.Errorf("release ID %q: use _any or flatcar", releaseID)
	}
	return rel, nil
}
