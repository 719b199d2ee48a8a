package release

// Compression of the downloaded image.
const (
	CompressionNone  = "none" // flatcar_production_<image>_image.img, a qcow2 (since stable 3602.2.0)
	CompressionBzip2 = "bz2"  // ...img.bz2, written by lbzip2
)

// ImageFile is the published name of an image: flatcar_production_<image>_image.img, plus ".bz2"
// for the bzip2-compressed download.
func ImageFile(image, compression string) string {
	name := "flatcar_production_" + image + "_image.img"
	if compression == CompressionBzip2 {
		name += ".bz2"
	}
	return name
}

// Every artifact X has these companions on the server.
const (
	DigestsSuffix       = ".DIGESTS"     // MD5, SHA1 and SHA512 sections
	SignedDigestsSuffix = ".DIGESTS.asc" // the same, clear-signed
	SignatureSuffix     = ".sig"         // detached signature of X
)

// Artifact lists the URLs that make up one downloadable file.
type Artifact struct {
	File          string `json:"file"`
	URL           string `json:"url"`
	DigestsURL    string `json:"digestsUrl"`
	SignedDigests string `json:"signedDigestsUrl"`
	SignatureURL  string `json:"signatureUrl"`
}

// Artifact returns the URLs of file in release r.
func (r Release) Artifact(file string) Artifact {
	return Artifact{
		File:          file,
		URL:           r.URL(file),
		DigestsURL:    r.URL(file + DigestsSuffix),
		SignedDigests: r.URL(file + SignedDigestsSuffix),
		SignatureURL:  r.URL(file + SignatureSuffix),
	}
}
