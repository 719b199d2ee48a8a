// Package release knows how Flatcar publishes its releases: channels, architectures, image names,
// the URL layout of the release server, version.txt and the DIGESTS files. It does no I/O beyond
// parsing what it is handed, so the rules are testable without a network.
package release

import (
	"cmp"
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
