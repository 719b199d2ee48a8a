package capo

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// How the OpenStackMachineTemplates name their image (--image-ref).
const (
	ImageRefFilter = "filter" // image.filter.name: the Glance name (default; CAPO's own Flatcar flavors)
	ImageRefID     = "id"     // image.id: the Glance ID
	ImageRefORC    = "orc"    // image.imageRef: an ORC Image in the same namespace (CAPO >= v0.11, CAPO's e2e)

	VarImageID = "OPENSTACK_FLATCAR_IMAGE_ID"
	// moveLabel makes clusterctl move take the object along (CAPO#2592 for ORC objects).
	moveLabel = "clusterctl.cluster.x-k8s.io/move"
)

// imageRefs lists the --image-ref values, default first.
var imageRefs = []string{ImageRefFilter, ImageRefID, ImageRefORC}

// ImageSource makes the ORC Image managed: ORC downloads the image from URL into Glance,
// checked against SHA512, and leaves it there when the ORC object is deleted (onDelete: detach).
type ImageSource struct {
	URL        string
	SHA512     string // hex
	Arch       string // amd64 or arm64 (Glance's architecture property)
	MinDiskGiB int
	MinRAMMiB  int
}

const filterBlock = "      image:\n        filter:\n          name: ${" + VarImageName + "}\n"

var sha512Hex = regexp.MustCompile(`^[0-9a-f]{128}$`)

// withImageRef rewrites the image selection of both machine templates for ref and, for an ORC
// reference, appends the ORC Image document. importByID makes an unmanaged Image import the
// Glance ID rather than the name.
func withImageRef(tmpl []byte, ref string, src *ImageSource, importByID bool) ([]byte, error) {
	if src != nil && ref == "" {
		ref = ImageRefORC
	}
	var block string
	switch ref {
	case "", ImageRefFilter:
		if src != nil {
			return nil, fmt.Errorf("--image-source needs --image-ref orc (a managed ORC Image is referenced by imageRef)")
		}
		return tmpl, nil
	case ImageRefID:
		if src != nil {
			return nil, fmt.Errorf("--image-source needs --image-ref orc, not id")
		}
		block = "      image:\n        id: ${" + VarImageID + "}\n"
	case ImageRefORC:
		block = "      image:\n        imageRef:\n          name: ${" + VarImageName + "}\n"
	default:
		return nil, fmt.Errorf("invalid --image-ref %q: %s", ref, strings.Join(imageRefs, ", "))
	}
	s := string(tmpl)
	if n := strings.Count(s, filterBlock); n != 2 {
		return nil, fmt.Errorf("embedded template: %d image filters, want 2", n)
	}
	s = strings.ReplaceAll(s, filterBlock, block)
	if ref != ImageRefORC {
		return []byte(s), nil
	}
	doc, err := orcImage(src, importByID)
	if err != nil {
		return nil, err
	}
	return []byte(strings.TrimRight(s, "\n") + "\n---\n" + doc), nil
}

// orcImage is the ORC Image the machine templates reference, sharing CAPO's clouds.yaml Secret.
func orcImage(src *ImageSource, importByID bool) (string, error) {
	var b strings.Builder
	b.WriteString(`apiVersion: openstack.k-orc.cloud/v1alpha1
kind: Image
metadata:
  name: ${` + VarImageName + `}
  labels:
    ` + moveLabel + `: "true"
spec:
  cloudCredentialsRef:
    secretName: ${CLUSTER_NAME}-cloud-config
    cloudName: ${OPENSTACK_CLOUD}
`)
	if src == nil {
		b.WriteString("  managementPolicy: unmanaged\n  import:\n")
		if importByID {
			b.WriteString("    id: ${" + VarImageID + "}\n")
		} else {
			b.WriteString("    filter:\n      name: ${" + VarImageName + "}\n      tags:\n      - flatcar-capo\n")
		}
		return b.String(), nil
	}
	if !strings.HasPrefix(src.URL, "http://") && !strings.HasPrefix(src.URL, "https://") || strings.ContainsAny(src.URL, "$\"'\n ") {
		return "", fmt.Errorf("invalid --image-source %q: want the http(s) URL of the image's qcow2 on your server", src.URL)
	}
	if !sha512Hex.MatchString(src.SHA512) {
		return "", fmt.Errorf("--image-source needs the image's sha512 (128 hex digits) for ORC's download hash: give --from-record BUILD.json or --image-sha512")
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "": "x86_64"}[src.Arch]
	if arch == "" {
		return "", fmt.Errorf("unknown architecture %q in the build record: amd64 or arm64", src.Arch)
	}
	fmt.Fprintf(&b, `  managementPolicy: managed
  managedOptions:
    onDelete: detach
  resource:
    name: ${%s}
    tags:
    - flatcar-capo
    properties:
      architecture: %s
`, VarImageName, arch)
	if src.MinDiskGiB > 0 {
		fmt.Fprintf(&b, "      minDiskGB: %d\n", src.MinDiskGiB)
	}
	if src.MinRAMMiB > 0 {
		fmt.Fprintf(&b, "      minMemoryMB: %d\n", src.MinRAMMiB)
	}
	fmt.Fprintf(&b, `      hardware:
        qemuGuestAgent: true
    content:
      containerFormat: bare
      diskFormat: qcow2
      download:
        url: %s
        hash:
          algorithm: sha512
          value: %s
`, yamlString(src.URL), src.SHA512)
	return b.String(), nil
}

// imageRefOptions are manifests' image selection as its flags (and a build record) give it,
// checked before the template is rendered.
type imageRefOptions struct {
	Ref         string       // ImageRefs; ImageRefORC when Source is set
	ID          string       // --image-id, or the build record's Glance ID
	SetID       string       // VarImageID as --set gives it
	Source      *ImageSource // --image-source, its sha512 from --image-sha512 or the record
	SHA512Given bool         // --image-sha512 was given
}

// Validate checks the combination; its errors wrap errs.ErrInvalid.
func (o imageRefOptions) Validate() error {
	if o.ID != "" && o.Ref == ImageRefFilter {
		return errs.Invalidf("--image-id is for --image-ref id or orc; --image-ref filter selects the image by name")
	}
	if o.Ref == ImageRefID && o.ID == "" && o.SetID == "" {
		return errs.Invalidf("--image-ref id needs the Glance ID: --image-id ID, or --from-record of a build that uploaded (--cloud)")
	}
	if o.Source == nil && o.SHA512Given {
		return errs.Invalidf("--image-sha512 is for --image-source")
	}
	if o.Source != nil && o.Source.SHA512 == "" {
		return errs.Invalidf("--image-source needs the image's sha512 for ORC's download hash: --from-record BUILD.json or --image-sha512 HEX")
	}
	return nil
}
