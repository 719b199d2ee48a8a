// Package sbom writes the CycloneDX (JSON, spec 1.6) software bill of materials of a node image:
// the Flatcar release it started from, the downloaded Kubernetes binaries, crictl and CNI
// plugins, the sysexts, the preloaded container images and flatcar-capo itself. The same
// Inventory gives the same bytes: no random serial number (it is derived from the content) and a
// timestamp only when one is given (SOURCE_DATE_EPOCH, via pkg/epoch).
package sbom

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
)

// Inventory is what an image holds, as the build record or inspect found it.
type Inventory struct {
	Subject Subject
	Flatcar Flatcar
	Files   []File
	Sysexts []Sysext
	Images  []Image
	Tool    string    // flatcar-capo's version
	Time    time.Time // the SBOM's timestamp; zero: none
}

// Subject is the image file the SBOM describes.
type Subject struct {
	File   string // base name
	SHA512 string // "" when not known (inspect of an image without its record)
	Name   string // the Glance image name
	Method string // build method
}

// Flatcar is the release the image is built from.
type Flatcar struct {
	Channel, Version, Arch string
	File, URL              string // the base image file and where it came from
	SHA512                 string // the base image's verified sha512
	Verified               bool   // checked against Flatcar's signed DIGESTS
	SBOM                   *Ref   // Flatcar's own package SBOM; nil: none published or given
}

// Ref is another SBOM this one refers to (CycloneDX external reference of type "bom"): Flatcar's
// SPDX package SBOM, left as Flatcar signed it rather than converted into components.
type Ref struct {
	URL      string // where it is published, or its file name for one given to inspect
	SHA512   string
	Verified bool // its SHA512 is in the release's clear-signed DIGESTS
}

// File is one downloaded binary or archive (kubeadm, kubelet, kubectl, crictl, CNI plugins),
// or a binary found in an image (Path, no URL).
type File struct {
	Name, Version, SHA256, URL, Path string
}

// Sysext is one systemd-sysext image in the image.
type Sysext struct {
	File, Version, SHA512, Path string
}

// Image is one preloaded container image.
type Image struct {
	Ref, Digest, Platform string // registry.k8s.io/pause:3.10, sha256:..., linux/amd64
}

// Property names of ours, in CycloneDX's property taxonomy style.
const (
	propChannel  = "flatcar-capo:flatcar:channel"
	propArch     = "flatcar-capo:flatcar:arch"
	propVerified = "flatcar-capo:flatcar:verified"
	propSBOMVer  = "flatcar-capo:flatcar:sbom:verified"
	propImage    = "flatcar-capo:image:name"
	propMethod   = "flatcar-capo:build:method"
	propPlatform = "flatcar-capo:oci:platform"
	propPath     = "flatcar-capo:path"
)

// BOM is the inventory as a CycloneDX BOM (without its serial number, see Encode).
func (inv Inventory) BOM() *cdx.BOM {
	bom := cdx.NewBOM()
	meta := &cdx.Metadata{
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "flatcar-capo", Version: inv.Tool,
			BOMRef: "tool:flatcar-capo", PackageURL: purl("golang", "github.com/flatcar-capo", "flatcar-capo", inv.Tool, nil)}}},
		Component: &cdx.Component{Type: cdx.ComponentTypeFile, BOMRef: "image", Name: inv.Subject.File, Version: inv.Flatcar.Version,
			Hashes: hashes(cdx.HashAlgoSHA512, inv.Subject.SHA512), Properties: props(propImage, inv.Subject.Name, propMethod, inv.Subject.Method)},
	}
	if !inv.Time.IsZero() {
		meta.Timestamp = inv.Time.UTC().Format(time.RFC3339)
	}
	bom.Metadata = meta
	var comps []cdx.Component
	if f := inv.Flatcar; f.Version != "" {
		comps = append(comps, cdx.Component{Type: cdx.ComponentTypeOS, BOMRef: "flatcar", Name: "flatcar", Version: f.Version,
			Description: "Flatcar Container Linux " + f.Channel + " " + f.Version + " (" + f.File + ")",
			PackageURL:  purl("generic", "", "flatcar", f.Version, map[string]string{"arch": f.Arch, "channel": f.Channel, "download_url": f.URL}),
			Hashes:      hashes(cdx.HashAlgoSHA512, f.SHA512), ExternalReferences: flatcarRefs(f),
			Properties: props(propChannel, f.Channel, propArch, f.Arch, propVerified, fmt.Sprint(f.Verified), propSBOMVer, sbomVerified(f.SBOM))})
	}
	for _, f := range inv.Files {
		c := cdx.Component{Type: cdx.ComponentTypeApplication, BOMRef: "file:" + cmp.Or(f.Path, f.Name), Name: f.Name, Version: f.Version,
			Hashes: hashes(cdx.HashAlgoSHA256, f.SHA256), ExternalReferences: refs(f.URL), Properties: props(propPath, f.Path)}
		if f.Version != "" || f.URL != "" {
			c.PackageURL = purl("generic", "", f.Name, f.Version, map[string]string{"download_url": f.URL})
		}
		comps = append(comps, c)
	}
	for _, s := range inv.Sysexts {
		comps = append(comps, cdx.Component{Type: cdx.ComponentTypeFile, BOMRef: "sysext:" + s.File, Name: s.File, Version: s.Version,
			Description: "systemd-sysext image", Hashes: hashes(cdx.HashAlgoSHA512, s.SHA512), Properties: props(propPath, s.Path)})
	}
	imgs := append([]Image(nil), inv.Images...)
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Ref+imgs[i].Platform < imgs[j].Ref+imgs[j].Platform })
	for _, im := range imgs {
		repo, tag := splitRef(im.Ref)
		_, arch, _ := strings.Cut(im.Platform, "/")
		name := repo[strings.LastIndex(repo, "/")+1:]
		comps = append(comps, cdx.Component{Type: cdx.ComponentTypeContainer, BOMRef: "image:" + im.Ref + "@" + im.Digest, Name: repo, Version: tag,
			PackageURL: purl("oci", "", name, im.Digest, map[string]string{"repository_url": repo, "tag": tag, "arch": arch}),
			Hashes:     hashes(cdx.HashAlgoSHA256, strings.TrimPrefix(im.Digest, "sha256:")), Properties: props(propPlatform, im.Platform)})
	}
	bom.Components = &comps
	return bom
}

// Encode is the SBOM's JSON. Its serial number is a name-based (SHA-1) UUID of the rest, so the
// same inventory always gives the same file and different ones different serials.
func (inv Inventory) Encode() ([]byte, error) {
	bom := inv.BOM()
	body, err := encode(bom)
	if err != nil {
		return nil, err
	}
	bom.SerialNumber = "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceURL, body).String()
	return encode(bom)
}

func encode(bom *cdx.BOM) ([]byte, error) {
	var b bytes.Buffer
	if err := cdx.NewBOMEncoder(&b, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encoding the SBOM: %w", err)
	}
	return b.Bytes(), nil
}

// Write stores the SBOM at path atomically (world-readable, like the build record: it holds
// no secret) and returns its bytes.
func (inv Inventory) Write(path string) ([]byte, error) {
	b, err := inv.Encode()
	if err != nil {
		return nil, err
	}
	return b, atomicfile.WriteFile(path, b, 0o644)
}

// Path is where the SBOM of an artifact lives.
func Path(artifact string) string { return artifact + ".cdx.json" }

func hashes(alg cdx.HashAlgorithm, hex string) *[]cdx.Hash {
	if hex == "" {
		return nil
	}
	return &[]cdx.Hash{{Algorithm: alg, Value: strings.ToLower(hex)}}
}

func refs(u string) *[]cdx.ExternalReference {
	if u == "" {
		return nil
	}
	return &[]cdx.ExternalReference{{Type: cdx.ERTypeDistribution, URL: u}}
}

// flatcarRefs are the release's download and, when there is one, Flatcar's package SBOM.
func flatcarRefs(f Flatcar) *[]cdx.ExternalReference {
	r := refs(f.URL)
	if f.SBOM == nil {
		return r
	}
	if r == nil {
		r = &[]cdx.ExternalReference{}
	}
	*r = append(*r, cdx.ExternalReference{Type: cdx.ERTypeBOM, URL: f.SBOM.URL, Hashes: hashes(cdx.HashAlgoSHA512, f.SBOM.SHA512),
		Comment: "Flatcar's package SBOM (SPDX JSON) of this release"})
	return r
}

func sbomVerified(r *Ref) string {
	if r == nil {
		return ""
	}
	return fmt.Sprint(r.Verified)
}

// props pairs names and values, leaving out empty values.
func props(kv ...string) *[]cdx.Property {
	var p []cdx.Property
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			p = append(p, cdx.Property{Name: kv[i], Value: kv[i+1]})
		}
	}
	if p == nil {
		return nil
	}
	return &p
}

// splitRef splits registry/repo:tag (a digest suffix dropped: it is given separately).
func splitRef(ref string) (repo, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

// purl is a package URL (github.com/package-url/purl-spec): qualifiers sorted by key, empty
// ones left out, values percent-encoded except '/' and ':' (as the spec's examples write
// repository_url and download_url), the version's ':' encoded (pkg:oci/x@sha256%3A...).
func purl(typ, namespace, name, version string, qualifiers map[string]string) string {
	var b strings.Builder
	b.WriteString("pkg:" + typ + "/")
	if namespace != "" {
		b.WriteString(namespace + "/")
	}
	b.WriteString(url.PathEscape(name))
	if version != "" {
		b.WriteString("@" + strings.ReplaceAll(url.PathEscape(version), ":", "%3A"))
	}
	sep := "?"
	for _, k := range slices.Sorted(maps.Keys(qualifiers)) {
		if qualifiers[k] != "" {
			b.WriteString(sep + k + "=" + strings.NewReplacer("%2F", "/", "%3A", ":").Replace(url.QueryEscape(qualifiers[k])))
			sep = "&"
		}
	}
	return b.String()
}
