package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"os"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/images"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Record is <artifact>.build.json, the build record: what was built from what, with which
// tools, and where it was uploaded. `flatcar-capo upload <artifact>` reads it (LoadRecord) for
// the Glance properties the flags do not set.
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
	InputsKey string             `json:"inputsKey"` // sha256 of Inputs: a re-run with the same key reuses
	Tools     Tools              `json:"tools"`
	Base      BaseImage          `json:"base"`
	Downloads []Download         `json:"downloads"`
	Artifacts []Artifact         `json:"artifacts"`
	Images    []images.ListEntry `json:"images,omitempty"` // preloaded, with their digests
	SBOM      *SBOMFile          `json:"sbom,omitempty"`   // the CycloneDX SBOM next to the artifact (sbom.go)
	Glance    []GlanceInfo       `json:"glance,omitempty"`
	Steps     []StepTiming       `json:"steps"`
	Seconds   float64            `json:"seconds"` // the run's wall time up to writing the record
	Reused    bool               `json:"reused"`
	DryRun    *Plan              `json:"plan,omitempty"`

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

	secrets string   // hashed into Key, never stored (the proxies' passwords)
	paths   []string // local paths of inputs, hashed into Key, never stored (build-host paths)
}

// Key is the sha256 of the canonical JSON of the inputs.
func (in Inputs) Key() string {
	b, _ := json.Marshal(in)
	b = append(b, in.secrets...)
	for _, p := range in.paths {
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

func newRecord(o *Options) *Record {
	return &Record{Method: o.Method, OEM: o.OEM, Arch: o.Release.Arch, Channel: o.Release.Channel,
		KubernetesVersion: o.Kubernetes.Kubernetes, Tools: Tools{FlatcarCapo: o.ToolVersion},
		Downloads: []Download{}, Artifacts: []Artifact{}, Steps: []StepTiming{}, CarriesSecrets: o.Images.SecretKinds()}
}

// RecordPath is where the build record of an artifact lives.
func RecordPath(artifact string) string { return artifact + ".build.json" }

// LoadRecord reads the record next to an image given to upload: a missing one is an empty
// record, an unreadable or broken one wraps errs.ErrInvalid (it came with the caller's image).
func LoadRecord(image string) (*Record, error) {
	r, err := ReadRecord(image)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &Record{}, nil
	case err != nil:
		return nil, errs.Invalidf("%s is not a valid build record: %w", RecordPath(image), err)
	}
	return r, nil
}

// GlanceValues are what the record says about the image's Glance metadata.
func (r *Record) GlanceValues() glance.RecordValues {
	v := glance.RecordValues{FlatcarVersion: r.FlatcarVersion, KubernetesVersion: r.KubernetesVersion, Arch: r.Arch, Channel: r.Channel, Method: r.Method,
		UEFIOnly: r.Arch == "arm64" || r.Arch == "aarch64" || r.Inputs.Base == "qemu_uefi" || strings.Contains(r.Base.File, "qemu_uefi")}
	if r.SBOM != nil {
		v.SBOMSHA256 = r.SBOM.SHA256
	}
	v.Secrets = r.CarriesSecrets
	return v
}

// RecordFile reads a record the caller names (manifests --from-record): one that cannot be
// read, or is not a build record (no image name), wraps errs.ErrInvalid.
func RecordFile(path string) (*Record, error) {
	b, err := infile.ReadFile("--from-record", path, infile.Record)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errs.Invalidf("--from-record %s is not a build record (the .build.json next to a built image): %v", path, err)
	}
	if r.ImageName == "" {
		return nil, errs.Invalidf("--from-record %s is not a build record (the .build.json next to a built image): it has no imageName", path)
	}
	return &r, nil
}

// ReadRecord reads the record next to artifact.
func ReadRecord(artifact string) (*Record, error) {
	b, err := infile.ReadFile("build record", RecordPath(artifact), infile.Record)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// write stores the record next to artifact, atomically.
func (r *Record) write(artifact string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// The record is world-readable: no URL credential or registered secret goes into it.
	return atomicfile.WriteFile(RecordPath(artifact), []byte(redact.Known(string(b))+"\n"), 0o644)
}
