// Package release knows how Flatcar publishes its releases: channels, architectures, image names,
// the URL layout of the release server, version.txt and the DIGESTS files. It does no I/O beyond
// parsing what it is handed, so the rules are testable without a network.
package release

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Channels, Arches and Images are the accepted values, in the order help texts list them.
var (
	Channels = []string{"stable", "beta", "alpha", "lts"}
	Arches   = []string{"amd64", "arm64"}
	Images   = []string{"qemu", "qemu_uefi", "openstack"}
)

// DefaultServer is Flatcar's release server; {channel} is replaced by the channel name.
const DefaultServer = "https://{channel}.release.flatcar-linux.net"

// Current is the version alias the server resolves through version.txt.
const Current = "current"

var (
	versionRe = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	// LTS also publishes one "current" per LTS stream: current-2024, current-2023, ...
	ltsCurrentRe = regexp.MustCompile(`^current-[0-9]{4}$`)
)

func oneOf(what, v string, valid []string) error {
	if slices.Contains(valid, v) {
		return nil
	}
	return errs.Invalidf("unknown %s %q; valid: %s", what, v, strings.Join(valid, ", "))
}

// ValidateChannel accepts stable, beta, alpha and lts.
func ValidateChannel(c string) error { return oneOf("channel", c, Channels) }

// ValidateArch accepts amd64 and arm64.
func ValidateArch(a string) error { return oneOf("arch", a, Arches) }

// ParseArch is the --arch rule of every command: amd64 or arm64, also spelled as systemd and
// uname do (x86-64, x86_64, aarch64); it returns the Go name the release server uses.
func ParseArch(a string) (string, error) {
	switch a {
	case "amd64", "x86-64", "x86_64":
		return "amd64", nil
	case "arm64", "aarch64":
		return "arm64", nil
	}
	return "", errs.Invalidf("invalid --arch: unknown arch %q; valid: %s (use amd64 (x86-64) or arm64)", a, strings.Join(Arches, ", "))
}

// ValidateImage accepts qemu, qemu_uefi and openstack.
func ValidateImage(i string) error { return oneOf("image", i, Images) }

// validateVersion accepts "current", a pinned X.Y.Z, and on lts "current-YYYY".
func validateVersion(channel, v string) error {
	switch {
	case v == Current, versionRe.MatchString(v):
		return nil
	case ltsCurrentRe.MatchString(v):
		if channel == "lts" {
			return nil
		}
		return errs.Invalidf("version %q exists only on the lts channel, not on %s", v, channel)
	}
	return errs.Invalidf("invalid version %q; use current, a release number such as 4230.2.3, or current-YYYY on lts", v)
}

// IsAlias reports whether v names a moving release (current, current-YYYY) rather than a number.
func IsAlias(v string) bool { return !versionRe.MatchString(v) }

// Release addresses one release directory on a server.
type Release struct {
	Server  string // URL template; {channel} is replaced, no trailing slash needed
	Channel string
	Arch    string
	Version string // a number, or an alias before resolution
}

// Validate checks every field (an empty Server is DefaultServer; any other must be an http(s) URL
// with a host once {channel} is replaced).
func (r Release) Validate() error {
	if err := ValidateChannel(r.Channel); err != nil {
		return errs.Invalidf("invalid --channel: %w", err)
	}
	if err := ValidateArch(r.Arch); err != nil {
		return errs.Invalidf("invalid --arch: %w", err)
	}
	if r.Server != "" {
		u, err := url.Parse(strings.ReplaceAll(r.Server, "{channel}", r.Channel))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errs.Invalidf("invalid --release-server %q: want an http(s) URL such as %s", r.Server, DefaultServer)
		}
	}
	if err := validateVersion(r.Channel, r.Version); err != nil {
		return errs.Invalidf("invalid --version: %w", err)
	}
	return nil
}

// Board is the release server's directory for an architecture (amd64 -> amd64-usr); the lts server
// names it the same way (https://lts.release.flatcar-linux.net/amd64-usr/current/).
func Board(arch string) string { return arch + "-usr" }

// DirURL is the release directory with a trailing slash:
// <server with {channel} replaced>/<arch>-usr/<version>/.
func (r Release) DirURL() string {
	server := cmp.Or(r.Server, DefaultServer)
	server = strings.TrimRight(strings.ReplaceAll(server, "{channel}", r.Channel), "/")
	return server + "/" + Board(r.Arch) + "/" + r.Version + "/"
}

// URL is the address of one file of the release.
func (r Release) URL(file string) string { return r.DirURL() + file }

// VersionFile is the file in a release directory that names the version it holds.
const VersionFile = "version.txt"

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

// SBOMFile is Flatcar's package SBOM (SPDX 2.x JSON, written by the scripts repo's
// build_library), published beside the images of a release with the same signed companions.
const SBOMFile = "flatcar_production_image_sbom.json"

// Every artifact X has these companions on the server.
const (
	digestsSuffix       = ".DIGESTS"     // MD5, SHA1 and SHA512 sections
	SignedDigestsSuffix = ".DIGESTS.asc" // the same, clear-signed
	signatureSuffix     = ".sig"         // detached signature of X
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
		DigestsURL:    r.URL(file + digestsSuffix),
		SignedDigests: r.URL(file + SignedDigestsSuffix),
		SignatureURL:  r.URL(file + signatureSuffix),
	}
}

// ParseVersionTxt reads version.txt, shell KEY=VALUE lines (FLATCAR_VERSION=4230.2.3, ...), and
// returns FLATCAR_VERSION after checking it is a release number.
func ParseVersionTxt(r io.Reader) (string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	v, ok := vars["FLATCAR_VERSION"]
	if !ok {
		return "", fmt.Errorf("version.txt has no FLATCAR_VERSION")
	}
	if !versionRe.MatchString(v) {
		return "", fmt.Errorf("version.txt has FLATCAR_VERSION=%q, not a release number", v)
	}
	return v, nil
}

// Digests is a parsed DIGESTS file: algorithm ("SHA512") -> file name -> lower-case hex digest.
type Digests map[string]map[string]string

// ParseDigests reads the "# <ALGO> HASH" sections of a DIGESTS file, each followed by lines
// "<hex>  <file>".
func ParseDigests(b []byte) (Digests, error) {
	d := Digests{}
	algo := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			algo = ""
			if len(f) == 2 && strings.EqualFold(f[1], "HASH") {
				algo = strings.ToUpper(f[0])
			}
		case algo != "":
			f := strings.Fields(line)
			if len(f) != 2 {
				return nil, fmt.Errorf("DIGESTS: malformed line %q", line)
			}
			if _, err := hex.DecodeString(f[0]); err != nil {
				return nil, fmt.Errorf("DIGESTS: %s digest of %s is not hex", algo, f[1])
			}
			if d[algo] == nil {
				d[algo] = map[string]string{}
			}
			d[algo][f[1]] = strings.ToLower(f[0])
		}
	}
	return d, sc.Err()
}

// SHA512 returns the SHA512 digest listed for file.
func (d Digests) SHA512(file string) (string, error) {
	h, ok := d["SHA512"][file]
	if !ok {
		return "", fmt.Errorf("DIGESTS lists no SHA512 for %s", file)
	}
	if len(h) != 128 {
		return "", fmt.Errorf("DIGESTS: SHA512 of %s has %d hex digits, want 128", file, len(h))
	}
	return h, nil
}
