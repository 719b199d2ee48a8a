package glance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// ToolTag is set on every image this tool creates; it marks leftovers that are safe to delete.
const ToolTag = "flatcar-capo"

// BuildRecord is the small JSON file <image>.build.json that the build step writes next to an
// image: {"flatcarVersion": "4459.2.0", "kubernetesVersion": "v1.33.1", "arch": "amd64"}.
// upload reads it for the default properties when flags do not give them.
type BuildRecord struct {
	FlatcarVersion    string `json:"flatcarVersion,omitempty"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	Arch              string `json:"arch,omitempty"` // amd64|arm64 (or x86_64|aarch64)
}

// BuildRecordPath is where the build record of image lives.
func BuildRecordPath(image string) string { return image + ".build.json" }

// ReadBuildRecord reads the build record next to image; a missing one is an empty record, an
// unreadable or broken one wraps errs.ErrInvalid (it comes with the caller's image).
func ReadBuildRecord(image string) (BuildRecord, error) {
	var r BuildRecord
	data, err := os.ReadFile(BuildRecordPath(image))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, errs.Invalid(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, errs.Invalidf("%s is not a valid build record: %w", BuildRecordPath(image), err)
	}
	return r, nil
}

// Metadata is what an image is created with, apart from its data.
type Metadata struct {
	Properties map[string]string
	Tags       []string
}

// MetadataInput is what decides the metadata: flags first, then the build record.
type MetadataInput struct {
	FlatcarVersion    string
	KubernetesVersion string
	Properties        []string // k=v, applied last
	Tags              []string
	Record            BuildRecord
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
	if v := first(in.FlatcarVersion, in.Record.FlatcarVersion); v != "" {
		p["os_version"] = v
	}
	if v := first(in.KubernetesVersion, in.Record.KubernetesVersion); v != "" {
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		p["kubernetes_version"] = v
		tags = append(tags, "kube-"+v)
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
	sort.Strings(tags)
	return Metadata{Properties: p, Tags: dedup(tags)}, nil
}

// Glance owns these attributes (or refuses them as properties); setting one is a mistake.
var reservedProperties = map[string]bool{
	"id": true, "name": true, "status": true, "checksum": true, "os_hash_algo": true, "os_hash_value": true,
	"size": true, "virtual_size": true, "created_at": true, "updated_at": true, "file": true, "schema": true,
	"self": true, "direct_url": true, "locations": true, "owner": true, "tags": true, "visibility": true,
	"protected": true, "os_hidden": true, "disk_format": true, "container_format": true, "min_disk": true,
	"min_ram": true, "stores": true,
}

var propertyKey = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,255}$`)

func validProperty(k, v string) error {
	switch {
	case !propertyKey.MatchString(k):
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
	if a == "" {
		a = runtime.GOARCH
	}
	switch a {
	case "amd64", "x86_64":
		return "x86_64", nil
	case "arm64", "aarch64":
		return "aarch64", nil
	}
	return "", errs.Invalidf("unknown architecture %q in the build record: want amd64 or arm64", a)
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
