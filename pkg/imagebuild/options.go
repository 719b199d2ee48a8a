// Package build is `flatcar-capo build`: packer-plugin-sdk multistep steps, one per file, that
// compose the library packages the single-step commands use (fetch, convert, oem, inspect,
// glance). The step list is common steps before and after, with the method's own steps
// ("packer" boots a VM; "sysext" bakes without one) in the middle.
package imagebuild

import (
	"cmp"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// Methods.
const (
	MethodPacker = "packer"
	MethodSysext = "sysext"
)

// Options are the resolved flags of one build.
type Options struct {
	Method string // MethodPacker (default) or MethodSysext

	// Base image: a release download (Release + Base) or a local file (BaseImage).
	Release            release.Release // Version may be an alias such as current
	Base               string          // fetch --image value: qemu (default) or openstack
	BaseImage          string          // local raw or qcow2 image instead of a download
	Keyring            *verify.Keyring
	InsecureSkipVerify bool
	CacheDir           string        // release and Kubernetes download cache
	Network            httpx.Options // retries, stall timeout and deadline of every download

	OEM         string       // --oem, default openstack
	KeepUpdates bool         // do not mask update-engine/locksmithd
	Node        NodeSettings // USB storage, Flatcar's official extensions and their server (nodesettings.go)

	Kubernetes kubernetes.Options // versions, mirrors, arch (filled from Release.Arch); exact after stepResolve
	// KubernetesRequested is --kubernetes-version as given when it was stable or a minor.
	KubernetesRequested string
	// KubernetesFrom says where a --sysext build read the Kubernetes version ("" otherwise).
	KubernetesFrom string
	Provision      []string     // user scripts run after ours (absolute paths)
	Sysext         []string     // --sysext FILE|URL for the sysext method
	Images         ImageOptions // container images preloaded, containerd settings
	// Containerd is --containerd-version/--runc-version: the containerd sysext that replaces
	// Flatcar's own (empty Version: Flatcar's). Arch and GitHubMirror come from the build's.
	Containerd containerd.Options

	// Packer method.
	Packer, QEMUBinary, Accelerator string
	CPUs, MemoryMiB                 int
	DiskSize                        int64 // bytes; 0 keeps the base image's size

	// Compress writes the qcow2 artifact with deflated clusters (in parallel, as convert
	// --compress): smaller to upload over a slow link, slower to write.
	Compress bool

	OutputDir string // default ./output/<image name>
	ImageName string // default flatcar-<channel>-<version>-kube-<k8s>[-sysext]

	Clouds   []string // upload to each; none: no upload
	OnExists string   // reuse|replace|fail
	// Glance metadata and format, as upload's flags: extra --property KEY=VALUE and --tag, the
	// --visibility, and --disk-format raw to stream the qcow2's disk as raw.
	Properties, Tags       []string
	Visibility, DiskFormat string
	// SignKey (--sign-key) writes detached signatures of the artifact, its record and its SBOM;
	// GlanceSigning signs the upload for Glance's signature verification.
	SignKey       *signing.Key
	GlanceSigning *glance.Signing

	Force  bool // rebuild even when a matching artifact exists
	DryRun bool // print the plan, boot nothing

	driver packer.Driver // tests: a scripted packer instead of the binary

	ToolVersion string    // flatcar-capo's version, for the record
	Log         io.Writer // progress lines (stderr)
	Now         func() time.Time

	http *httpx.Client // made from Network once, used by every downloading step
}

// Defaults for the flags.
const (
	DefaultOEM      = "openstack"
	DefaultCPUs     = 2
	DefaultMemory   = 2048
	defaultOnExists = "reuse"
)

// DefaultImageName is image-builder's convention, flatcar-<channel>-<version>-kube-<k8s>; the
// sysext method adds -sysext so both methods' images of one release live in one Glance.
func DefaultImageName(method, channel, version, k8s string) string {
	n := fmt.Sprintf("flatcar-%s-%s-kube-%s", channel, version, k8s)
	if method == MethodSysext {
		n += "-sysext"
	}
	return n
}

// client is the build's one HTTP client (all downloads share its settings).
func (o *Options) client() *httpx.Client {
	if o.http == nil {
		o.http = httpx.New(o.Network)
	}
	return o.http
}

// Validate checks what can be checked before anything is downloaded and fills the defaults; its
// errors wrap errs.ErrInvalid.
func (o *Options) Validate() error { return errs.Invalid(o.validate()) }

func (o *Options) validate() error {
	o.Method = cmp.Or(o.Method, MethodPacker)
	arch, err := release.ParseArch(o.Release.Arch)
	if err != nil {
		return err
	}
	o.Release.Arch = arch
	if err := o.Release.Validate(); err != nil {
		return err
	}
	if _, ok := methods[o.Method]; !ok {
		return fmt.Errorf("invalid --method %q: must be %s or %s", o.Method, MethodPacker, MethodSysext)
	}
	switch o.Base {
	case "":
		o.Base = "qemu"
		if o.Method == MethodSysext {
			o.Base = "openstack"
		}
	case "qemu", "openstack":
	case "qemu_uefi":
		if o.Method != MethodSysext {
			return fmt.Errorf("--base qemu_uefi needs --method sysext (the packer method boots its build VM with BIOS); or use --base qemu")
		}
	default:
		return fmt.Errorf("invalid --base %q: must be qemu, openstack or (--method sysext) qemu_uefi (the values of fetch --image)", o.Base)
	}
	if err := glance.ValidVisibility(o.Visibility); err != nil {
		return err
	}
	if err := glance.RefuseSecretsInPublic(o.Visibility, o.Images.SecretKinds()); err != nil {
		return err
	}
	switch o.DiskFormat {
	case "", "qcow2", "raw":
	default:
		return fmt.Errorf("invalid --disk-format %q: qcow2 (default) or raw (for Ceph-backed Glance)", o.DiskFormat)
	}
	if _, err := glance.BuildMetadata(glance.MetadataInput{Properties: o.Properties, Tags: o.Tags, Record: record.Record{Arch: "amd64"}}); err != nil {
		return err
	}
	if err := o.Node.validate(); err != nil {
		return err
	}
	o.OEM = cmp.Or(o.OEM, DefaultOEM)
	if _, err := (oem.SetOptions{ID: o.OEM}).Validate(); err != nil {
		return err // the OEM step's own rule, checked before anything is downloaded or booted
	}
	o.CPUs, o.MemoryMiB = cmp.Or(o.CPUs, DefaultCPUs), cmp.Or(o.MemoryMiB, DefaultMemory)
	if o.CPUs < 1 || o.MemoryMiB < 256 {
		return fmt.Errorf("--cpus must be at least 1 and --memory at least 256 (MiB), got %d and %d", o.CPUs, o.MemoryMiB)
	}
	if o.DiskSize < 0 || o.DiskSize%(1<<20) != 0 {
		return fmt.Errorf("--disk-size must be a positive whole number of MiB, not %d bytes", o.DiskSize)
	}
	o.OnExists = cmp.Or(o.OnExists, defaultOnExists)
	if _, err := glance.ParseOnExists(o.OnExists); err != nil {
		return err
	}
	for i, p := range o.Provision {
		if o.Provision[i], err = filepath.Abs(p); err != nil {
			return fmt.Errorf("--provision %s: %v", p, err)
		}
	}
	o.Log = cmp.Or(o.Log, io.Discard)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Network.Log = cmp.Or(o.Network.Log, o.Log)
	if err := o.Network.Validate(); err != nil {
		return err
	}
	o.Kubernetes.Arch = o.Release.Arch
	if err := o.Images.validate(); err != nil {
		return err
	}
	for _, w := range o.Images.Warnings() {
		fmt.Fprintf(o.Log, "warning: %s\n", w)
	}
	if err := o.Kubernetes.Validate(); err != nil {
		return err
	}
	if err := o.validateContainerd(); err != nil {
		return err
	}
	if st, err := os.Stat(o.OutputDir); o.OutputDir != "" && err == nil && !st.IsDir() { // before any work
		return fmt.Errorf("--output-dir %s is an existing file, not a directory; give a directory (it is created when missing)", o.OutputDir)
	}
	return nil
}
