package glance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
)

// ToolTag is set on every image this tool creates; it marks leftovers that are safe to delete.
const ToolTag = "flatcar-capo"

// RefuseSecretsInPublic refuses --visibility public or community for an image that holds
// credentials (secrets names their kinds): everyone in the cloud could boot it and read them.
// Its error wraps errs.ErrInvalid.
func RefuseSecretsInPublic(visibility string, secrets []string) error {
	if len(secrets) == 0 || (visibility != "public" && visibility != "community") {
		return nil
	}
	return errs.Invalidf("--visibility %s: the image holds %s, which every user of the cloud could read from a %s image: use --visibility private or shared, or build the image without them (pull through a mirror that needs no login, a proxy without a password)",
		visibility, strings.Join(secrets, " and "), visibility)
}

// PropertySBOMSHA256 ties a Glance image to the SBOM written next to its artifact.
const PropertySBOMSHA256 = "flatcar_capo_sbom_sha256"

// Metadata is what an image is created with, apart from its data.
type Metadata struct {
	Properties map[string]string
	Tags       []string
	MinDiskGiB int // Nova refuses a flavor or root volume smaller than this
	MinRAMMiB  int
}

// DefaultMinRAMMiB is min_ram: kubeadm's preflight refuses nodes with less than 1700 MB.
const DefaultMinRAMMiB = 2048

// MinDiskGiB is min_disk for an image of virtual size bytes: whole GiB, rounded up.
func MinDiskGiB(virtualSize int64) int { return int((virtualSize + 1<<30 - 1) >> 30) }

// MetadataInput is what decides the metadata: flags first, then the build record.
type MetadataInput struct {
	FlatcarVersion    string
	KubernetesVersion string
	Properties        []string // k=v, applied last
	Tags              []string
	// Record is the image's build record (<image>.build.json; empty: none): its versions, its
	// arch and firmware, its fleet slot (channel, method) and its SBOM's sha256.
	Record      record.Record
	VirtualSize int64  // bytes of the disk the guest sees: min_disk
	MinDiskGiB  int    // --min-disk; at least the virtual size
	MinRAMMiB   int    // --min-ram; 0 is DefaultMinRAMMiB
	Firmware    string // --firmware uefi|bios; "" decides from the record
}

// BuildMetadata returns the default Flatcar/CAPO properties and tags, overridden by the user's
// --property values, or an error (errs.ErrInvalid) naming the first invalid property or tag.
func BuildMetadata(in MetadataInput) (Metadata, error) {
	arch, err := glanceArch(in.Record.Arch)
	if err != nil {
		return Metadata{}, err
	}
	p := map[string]string{
		"os_distro":           "flatcar",
		"os_type":             "linux",
		"hw_qemu_guest_agent": "yes",
		"architecture":        arch,
	}
	tags := []string{ToolTag}
	if v := cmp.Or(in.FlatcarVersion, in.Record.FlatcarVersion); v != "" {
		p["os_version"] = v
	}
	if v := cmp.Or(in.KubernetesVersion, in.Record.KubernetesVersion); v != "" {
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		p["kubernetes_version"] = v
		tags = append(tags, "kube-"+v)
	}
	if in.Record.Channel != "" {
		p[PropertyChannel] = in.Record.Channel
	}
	if in.Record.Method != "" {
		p[PropertyMethod] = in.Record.Method
	}
	if in.Record.SBOM != nil && in.Record.SBOM.SHA256 != "" {
		p[PropertySBOMSHA256] = in.Record.SBOM.SHA256
	}
	for _, kv := range in.Properties {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Metadata{}, errs.Invalidf("invalid --property %q: want KEY=VALUE", kv)
		}
		if err := validProperty(k, v); err != nil {
			return Metadata{}, errs.Invalidf("invalid --property %q: %w", kv, err)
		}
		p[k] = v
	}
	for _, t := range in.Tags {
		if t == "" || len(t) > 255 || strings.ContainsAny(t, "/,") {
			return Metadata{}, errs.Invalidf("invalid --tag %q: a tag has 1-255 characters and no '/' or ','", t)
		}
		tags = append(tags, t)
	}
	switch in.Firmware {
	case "uefi":
		p["hw_firmware_type"] = "uefi"
	case "bios":
	case "":
		if in.Record.UEFIOnly() || arch == "aarch64" {
			p["hw_firmware_type"] = "uefi" // Nova would boot it with BIOS, and it would not start
		}
	default:
		return Metadata{}, errs.Invalidf("invalid --firmware %q: uefi or bios", in.Firmware)
	}
	m := Metadata{MinDiskGiB: MinDiskGiB(in.VirtualSize), MinRAMMiB: in.MinRAMMiB}
	if in.MinDiskGiB < 0 || in.MinRAMMiB < 0 {
		return Metadata{}, errs.Invalidf("--min-disk and --min-ram must not be negative")
	}
	if in.MinDiskGiB > 0 {
		if in.MinDiskGiB < m.MinDiskGiB {
			return Metadata{}, errs.Invalidf("--min-disk %d is below the image's virtual size (%d GiB): Nova could not write it to such a disk", in.MinDiskGiB, m.MinDiskGiB)
		}
		m.MinDiskGiB = in.MinDiskGiB
	}
	m.MinRAMMiB = cmp.Or(m.MinRAMMiB, DefaultMinRAMMiB)
	slices.Sort(tags)
	m.Tags, m.Properties = slices.Compact(tags), p
	return m, nil
}

// Validate checks the caller's choices of an upload (name, visibility); its errors wrap
// errs.ErrInvalid.
func (r *Request) Validate() error {
	if r.Name == "" {
		return errs.Invalidf("--name is required: CAPO finds the image by its name")
	}
	return ValidVisibility(r.Visibility)
}

// ValidVisibility accepts Glance's visibilities ("" leaves Glance's default).
func ValidVisibility(v string) error {
	switch v {
	case "", "private", "shared", "community", "public":
		return nil
	}
	return errs.Invalidf("invalid --visibility %q: must be private, shared, community or public", v)
}

// Glance owns these attributes (or refuses them as properties); setting one is a mistake.
var reservedProperties = map[string]bool{
	"id": true, "name": true, "status": true, "checksum": true, "os_hash_algo": true, "os_hash_value": true,
	"size": true, "virtual_size": true, "created_at": true, "updated_at": true, "file": true, "schema": true,
	"self": true, "direct_url": true, "locations": true, "owner": true, "tags": true, "visibility": true,
	"protected": true, "os_hidden": true, "disk_format": true, "container_format": true, "min_disk": true,
	"min_ram": true, "stores": true,
}

// The length is checked apart: {1,255} compiles to 255 copies, 0.5 ms of every command's start-up.
var propertyKey = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

func validProperty(k, v string) error {
	switch {
	case len(k) > 255 || !propertyKey.MatchString(k):
		return errors.New("a key has 1-255 characters from A-Z a-z 0-9 _ . : -")
	case reservedProperties[k]:
		return fmt.Errorf("%q is set by Glance or by a flag of its own, not as a property", k)
	case strings.HasPrefix(k, "os_glance"):
		return errors.New("the os_glance prefix is reserved by Glance")
	case len(v) > 255:
		return errors.New("a value has at most 255 characters")
	}
	return nil
}

// glanceArch maps a build record's architecture to Glance's names (x86_64, aarch64); without
// one, the image is taken to be for the machine running the upload.
func glanceArch(a string) (string, error) {
	a = cmp.Or(a, runtime.GOARCH)
	switch a {
	case "amd64", "x86_64":
		return "x86_64", nil
	case "arm64", "aarch64":
		return "aarch64", nil
	}
	return "", errs.Invalidf("unknown architecture %q in the build record: want amd64 or arm64", a)
}

// Properties that say which fleet slot an image fills (set on upload from the build record), so
// plan and prune group images without guessing from names.
const (
	PropertyChannel = "flatcar_channel"
	PropertyMethod  = "flatcar_capo_method"
)

// ListToolImages lists the images this tool uploaded (tagged ToolTag) that the token's project
// owns, the os_hidden ones too when hidden is true (Glance leaves them out of a default list).
// Glance also lists other projects' public and shared images: they are left out (asked for by
// owner, and checked, since a Glance or a proxy may ignore the filter), so that nothing decided
// from this list touches or counts another project's image. Each image is listed once.
func ListToolImages(ctx context.Context, c *Cloud, hidden bool) ([]images.Image, error) {
	if c.ProjectID == "" {
		return nil, fmt.Errorf("cloud %s: the token names no project, so this project's images cannot be told from others': use credentials scoped to a project (project_name or project_id in clouds.yaml)", c.Label())
	}
	all := []images.Image{}
	seen := map[string]bool{}
	hiddens := []bool{false}
	if hidden {
		hiddens = append(hiddens, true)
	}
	for _, h := range hiddens {
		some, err := list(ctx, c, images.ListOpts{Tags: []string{ToolTag}, Hidden: h, Owner: c.ProjectID}, "listing the images tagged "+ToolTag)
		if err != nil {
			return nil, err
		}
		for _, img := range some {
			if img.Owner == c.ProjectID && !seen[img.ID] {
				seen[img.ID] = true
				all = append(all, img)
			}
		}
	}
	return all, nil
}

// HideImage sets os_hidden: the image stays bootable by ID (and by running clusters) but is left
// out of default lists, so CAPO's name filter and new users stop finding it.
func HideImage(ctx context.Context, c *Cloud, id string) error {
	_, err := images.Update(ctx, c.Image, id, images.UpdateOpts{images.ReplaceImageHidden{NewHidden: true}}).Extract()
	if err != nil {
		return glanceError(c, "hiding image "+id, err)
	}
	return nil
}

// CountActiveImages counts the active images matching name and every tag, as CAPO's image filter
// does (it needs exactly one).
func CountActiveImages(ctx context.Context, c *Cloud, name string, tags []string) (int, error) {
	all, err := activeImages(ctx, c, name, tags)
	return len(all), err
}

// MinDiskOfImages is the largest min_disk (GiB) of the active images matching name and tags.
func MinDiskOfImages(ctx context.Context, c *Cloud, name string, tags []string) (int, error) {
	all, err := activeImages(ctx, c, name, tags)
	if err != nil {
		return 0, err
	}
	m := 0
	for _, img := range all {
		m = max(m, img.MinDiskGigabytes)
	}
	return m, nil
}

// activeImages lists the active images matching name and every tag.
func activeImages(ctx context.Context, c *Cloud, name string, tags []string) ([]images.Image, error) {
	opts := images.ListOpts{Name: name, Status: images.ImageStatusActive, Tags: tags}
	return list(ctx, c, opts, fmt.Sprintf("listing the images named %q", name))
}
