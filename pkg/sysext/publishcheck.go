package sysext

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// What a published bakery writes is line- and key-oriented text (SHA256SUMS lines, systemd
// unit-file style transfers), read by sha256sum, systemd-sysupdate and gpg. One validator per
// kind of value keeps anything that could add a line or a key out of them.

// publishName is a sysext file name that is one token everywhere it is written: no control
// character, space, backslash (sha256sum escapes those), slash or '%' (a systemd specifier).
var publishName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*\.raw$`)

// validPublishName checks a .raw file name before it goes into SHA256SUMS.
func validPublishName(name string) error {
	if !publishName.MatchString(name) {
		return errs.Invalidf("sysext file name %q cannot be published: only letters, digits and . _ + ~ - are allowed (no spaces, control characters, backslashes or %%), so SHA256SUMS keeps one line per file; rename it, e.g. kubernetes-v1.35.2-x86-64.raw", name)
	}
	return nil
}

// ValidBakeryURL checks the URL a bakery is served at (sysext publish --url, manifests
// --sysupdate-url): it becomes a transfer's Path= and the base of every download there.
func ValidBakeryURL(flag, raw string) error {
	fix := fmt.Sprintf("want the plain http(s) URL of the directory, e.g. %s http://10.0.0.5/ext", flag)
	if err := OneLineURL(flag, raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errs.Invalidf("%s %q: %v; %s", flag, raw, err, fix)
	case u.Scheme != "http" && u.Scheme != "https":
		return errs.Invalidf("%s %q is not an http(s) URL; %s", flag, raw, fix)
	case u.Host == "":
		return errs.Invalidf("%s %q has no host; %s", flag, raw, fix)
	case u.User != nil:
		return errs.Invalidf("%s: a URL with a user or password would be written into world-readable transfer files; serve the bakery without credentials", flag)
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return errs.Invalidf("%s %q has a query or fragment: systemd-sysupdate appends file names to it; %s", flag, raw, fix)
	case strings.Contains(raw, "%"):
		return errs.Invalidf("%s %q contains '%%', which systemd expands as a specifier in transfer files; serve the bakery at a path without percent-encoding", flag, raw)
	}
	return nil
}

// OneLineURL refuses a URL with a control character or space: written into a line-oriented
// file (a transfer, CLC YAML) it would end the line and start one of its own.
func OneLineURL(flag, raw string) error {
	for _, r := range raw {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return errs.Invalidf("%s %q contains a control character or space (it would end the line it is written on); percent-encode it or serve the files at a plain URL", flag, raw)
		}
	}
	return nil
}
