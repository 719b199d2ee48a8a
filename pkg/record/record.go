// Package record is the build record, <artifact>.build.json: what `build` made from what, with
// which tools, and where it was uploaded. It is the one type and the one JSON shape every command
// reads it as (build's reuse, verify, upload, manifests --from-record, plan --output-dir), read
// through pkg/infile and written through pkg/atomicfile. Records older builds wrote read as they
// are: a field is only ever added, with omitempty when its absence means the old behaviour.
package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/images"
)

// Record is <artifact>.build.json, the build record.
type Record struct {
	FlatcarVersion    string `json:"flatcarVersion"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Arch              string `json:"arch"`

	ImageName string `json:"imageName"`
	Method    string `json:"method"`
	Channel   string `json:"channel"`
	OEM       string `json:"oem"`
	// Flavor is the `manifests --flavor` that fits: baked (packer), sysext-baked (sysext).
	Flavor    string `json:"flavor"`
	Manifests string `json:"manifestsCommand"`

	Inputs    Inputs             `json:"inputs"`
	InputsKey string             `json:"inputsKey"` // Inputs.Key: a re-run with the same key reuses
	Tools     Tools              `json:"tools"`
	Base      BaseImage          `json:"base"`
	Downloads []Download         `json:"downloads"`
	Artifacts []Artifact         `json:"artifacts"`        // the image first, then the files made with it
	Images    []images.ListEntry `json:"images,omitempty"` // preloaded, with their digests
	SBOM      *SBOMFile          `json:"sbom,omitempty"`   // the CycloneDX SBOM next to the artifact
	Glance    []GlanceInfo       `json:"glance,omitempty"`
	Steps     []StepTiming       `json:"steps"`
	Seconds   float64            `json:"seconds"` // the run's wall time up to writing the record
	Reused    bool               `json:"reused"`

	// CarriesSecrets names the credentials baked into the image (registry logins, a proxy
	// password): upload and build refuse to make such an image public or community.
	CarriesSecrets []string `json:"carriesSecrets,omitempty"`
}

// Inputs is everything that decides the artifact's content.
type Inputs struct {
	Method           string   `json:"method"`
	Channel          string   `json:"channel"`
	Version          string   `json:"version"`
	Arch             string   `json:"arch"`
	Base             string   `json:"base"`
	BaseImage        string   `json:"baseImage,omitempty"` // name:size:mtime of --base-image (its path is in the key only)
	ReleaseServer    string   `json:"releaseServer,omitempty"`
	OEM              string   `json:"oem"`
	Kubernetes       string   `json:"kubernetesVersion"`
	Crictl           string   `json:"crictlVersion"`
	CNI              string   `json:"cniVersion"`
	KubernetesMirror string   `json:"kubernetesMirror"`
	GitHubMirror     string   `json:"githubMirror"`
	Provision        []string `json:"provision,omitempty"` // sha256:name of each script
	Sysext           []string `json:"sysext,omitempty"`    // sha512:name|URL of each --sysext (its content)
	KeepUpdates      bool     `json:"keepUpdates"`
	DiskSize         int64    `json:"diskSize,omitempty"`
	Images           []string `json:"images,omitempty"`     // preload and containerd settings
	Compressed       bool     `json:"compressed,omitempty"` // --compress (omitted when off: older keys stay)
	// Since the protective MBR and USB storage off: a hybrid base's artifact and the USB default
	// changed, so older records' keys no longer match (--keep-usb-storage alone changes nothing).
	ProtectiveMBR     bool     `json:"protectiveMbr,omitempty"`
	USBStorageOff     bool     `json:"usbStorageOff,omitempty"`
	EnableSysext      []string `json:"enableSysext,omitempty"`
	ReleaseFileServer string   `json:"releaseFileServer,omitempty"`
	Containerd        string   `json:"containerd,omitempty"` // --containerd-version and its runc (omitted without)
	// NodeFiles is the sha256 of the node files flatcar-capo itself defines that the method bakes
	// (kubeadm's drop-in, units, masks, the Packer scripts): a flatcar-capo whose node files
	// changed builds anew. An older record has none, so its key never matches: it rebuilds.
	NodeFiles string `json:"nodeFiles,omitempty"`
}

// Key is the sha256 of the inputs' canonical JSON, then secrets (the proxies' passwords) and
// each of paths (the build host's paths of local inputs) after a 0 byte: what decides the
// content without ever being stored.
func (in Inputs) Key(secrets string, paths []string) string {
	b, _ := json.Marshal(in)
	b = append(b, secrets...)
	for _, p := range paths {
		b = append(append(b, 0), p...)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Tools are the versions of what made the artifact.
type Tools struct {
	FlatcarCapo   string `json:"flatcarCapo"`
	Packer        string `json:"packer,omitempty"`
	PackerPath    string `json:"packerPath,omitempty"` // the packer binary's name (not its build-host path)
	Accelerator   string `json:"accelerator,omitempty"`
	QEMU          string `json:"qemu,omitempty"`
	Ignition      string `json:"ignitionSpec,omitempty"`
	BuildVMConfig string `json:"buildVMConfig,omitempty"` // fw_cfg or config-2
}

// BaseImage is the image the build started from.
type BaseImage struct {
	File     string `json:"file"`
	URL      string `json:"url,omitempty"`
	SHA512   string `json:"sha512,omitempty"`
	Verified bool   `json:"verified"`
	Cached   bool   `json:"cached"`
	// MBR is the base's MBR kind; a hybrid one (Flatcar LTS 4081, releases before 4459.2.0) is
	// replaced with a protective MBR in the artifact (MBRReplaced), as Glance 2026.2 and Nova want.
	MBR         string `json:"mbr,omitempty"`
	MBRReplaced bool   `json:"mbrReplaced,omitempty"`
	// SBOM is Flatcar's package SBOM of the release, verified like the image; nil when the
	// release publishes none (or the base is a local file or not verified).
	SBOM *FlatcarSBOM `json:"sbom,omitempty"`
}

// FlatcarSBOM is where Flatcar publishes its SBOM of the release and its verified sha512.
type FlatcarSBOM struct {
	URL      string `json:"url"`
	SHA512   string `json:"sha512"`
	Verified bool   `json:"verified"`
}

// Download is one verified Kubernetes download.
type Download struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Artifact is one file the build wrote, with its sha512.
type Artifact struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA512 string `json:"sha512"`
}

// SBOMFile names the SBOM in the record: its file (next to the artifact) and sha256, which
// upload sets as the Glance property flatcar_capo_sbom_sha256 and --sign-key signs.
type SBOMFile struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Format string `json:"format"` // CycloneDX 1.6 JSON
}

// GlanceInfo is one upload.
type GlanceInfo struct {
	Cloud  string `json:"cloud"`
	Region string `json:"region,omitempty"`
	ID     string `json:"id"`
	Action string `json:"action"`
}

// StepTiming is one step's wall time.
type StepTiming struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Status  string  `json:"status"`
}

// SBOMPath is where the SBOM the record names lies: beside artifact, under its file name
// (never a path the record gives); "" when it names none.
func (r *Record) SBOMPath(artifact string) string {
	if r.SBOM == nil || r.SBOM.File == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(artifact), filepath.Base(r.SBOM.File))
}

// SignedFiles are the files build --sign-key signs for artifact and verify checks: the image, its
// record and the SBOM the record names, in order.
func (r *Record) SignedFiles(artifact string) []string {
	files := []string{artifact, Path(artifact)}
	if p := r.SBOMPath(artifact); p != "" {
		files = append(files, p)
	}
	return files
}

// UEFIOnly says the image boots only with UEFI firmware: arm64, or the qemu_uefi base.
func (r *Record) UEFIOnly() bool {
	return r.Arch == "arm64" || r.Arch == "aarch64" || r.Inputs.Base == "qemu_uefi" || strings.Contains(r.Base.File, "qemu_uefi")
}
