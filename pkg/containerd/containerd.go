// Package containerd downloads the containerd a user chose instead of Flatcar's built-in one:
// containerd's release tarball and runc from their GitHub releases (or a mirror in GitHub's
// layout), each checked against its published sha256 before anything uses it, and cached.
// pkg/sysext makes the containerd sysext of them.
package containerd

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// DefaultGitHubMirror is where the releases are when no mirror is given.
const DefaultGitHubMirror = "https://github.com"

// defaultRunc is the runc each checked containerd release names in its
// script/setup/runc-version (what its CI tests and its own release builds with).
var defaultRunc = map[string]string{
	"2.1.5": "v1.3.3",
	"2.2.9": "v1.3.6",
	"2.3.4": "v1.4.3",
	"2.3.7": "v1.5.2",
	"2.4.0": "v1.5.1",
	"2.4.2": "v1.5.2",
}

// DefaultRuncFor is the runc that fits containerd v: the one its release names, else that of
// the newest checked release of its minor; "" when the minor is unknown (--runc-version then).
func DefaultRuncFor(v string) string {
	v = strings.TrimPrefix(v, "v")
	if r, ok := defaultRunc[v]; ok {
		return r
	}
	i := strings.LastIndex(v, ".")
	if i < 0 {
		return ""
	}
	minor := v[:i]
	best, bestPatch := "", -1
	for k, r := range defaultRunc {
		var p int
		if strings.HasPrefix(k, minor+".") {
			if _, err := fmt.Sscanf(strings.TrimPrefix(k, minor+"."), "%d", &p); err == nil && p > bestPatch {
				best, bestPatch = r, p
			}
		}
	}
	return best
}

// Options name the versions and where to get them.
type Options struct {
	Version      string // containerd, 2.3.7 (a leading v is dropped)
	Runc         string // runc release tag, v1.5.2; empty: DefaultRuncFor(Version)
	Arch         string // amd64 or arm64
	GitHubMirror string // replaces https://github.com
	CacheDir     string // <CacheDir>/containerd/...
}

var (
	versionRe = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)
	runcRe    = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)
)

// Validate fills the defaults and checks the versions, the architecture and the mirror.
func (o *Options) Validate() error {
	o.Version = strings.TrimPrefix(o.Version, "v")
	if !versionRe.MatchString(o.Version) {
		return errs.Invalidf("invalid --containerd-version %q: want a containerd release, e.g. 2.3.7 (github.com/containerd/containerd/releases)", o.Version)
	}
	if o.Runc == "" {
		o.Runc = DefaultRuncFor(o.Version)
		if o.Runc == "" {
			return errs.Invalidf("no known runc for containerd %s: give --runc-version, e.g. v1.5.2 (the one its script/setup/runc-version names)", o.Version)
		}
	}
	if !strings.HasPrefix(o.Runc, "v") {
		o.Runc = "v" + o.Runc
	}
	if !runcRe.MatchString(o.Runc) {
		return errs.Invalidf("invalid --runc-version %q: want a runc release tag, e.g. v1.5.2", o.Runc)
	}
	o.Arch = cmp.Or(o.Arch, "amd64")
	if o.Arch != "amd64" && o.Arch != "arm64" {
		return errs.Invalidf("invalid arch %q for the containerd downloads: amd64 or arm64", o.Arch)
	}
	o.GitHubMirror = strings.TrimRight(cmp.Or(o.GitHubMirror, DefaultGitHubMirror), "/")
	if !strings.HasPrefix(o.GitHubMirror, "http://") && !strings.HasPrefix(o.GitHubMirror, "https://") {
		return errs.Invalidf("invalid --github-mirror %q: want an http(s) URL", o.GitHubMirror)
	}
	return nil
}

// TarballURL is containerd's release tarball (bin/containerd, ctr, the shim, containerd-stress);
// its checksum is TarballURL+".sha256sum".
func (o Options) TarballURL() string {
	return fmt.Sprintf("%s/containerd/containerd/releases/download/v%s/containerd-%s-linux-%s.tar.gz", o.GitHubMirror, o.Version, o.Version, o.Arch)
}

// RuncURL is runc's static binary; RuncSumsURL its release's runc.sha256sum (every asset).
func (o Options) RuncURL() string {
	return fmt.Sprintf("%s/opencontainers/runc/releases/download/%s/runc.%s", o.GitHubMirror, o.Runc, o.Arch)
}

// RuncSumsURL is the runc release's checksum file.
func (o Options) RuncSumsURL() string {
	return fmt.Sprintf("%s/opencontainers/runc/releases/download/%s/runc.sha256sum", o.GitHubMirror, o.Runc)
}
