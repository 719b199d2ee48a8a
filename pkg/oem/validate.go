package oem

import (
	"regexp"
	"slices"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// The OEM grub.cfg is sourced by GRUB and its values sit inside GRUB-script double quotes, so a
// value is accepted only if it cannot leave the quotes or expand anything: no `"`, `$`, `\`,
// `;`, newline, backquote or space inside a word.
var (
	idPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	kernelArgWord  = regexp.MustCompile(`^[A-Za-z0-9._,:/=+@-]+$`)
	maxValueLength = 1024
)

// KnownIDs are the platform ids Flatcar's initrd (Ignition, afterburn/coreos-metadata) accepts as
// flatcar.oem.id, from Flatcar's image types and Ignition's platform list.
var KnownIDs = []string{
	"akamai", "ami", "azure", "brightbox", "cloudsigma", "cloudstack", "digitalocean",
	"equinixmetal", "exoscale", "file", "gce", "hetzner", "hyperv", "interoute", "kubevirt",
	"metal", "niftycloud", "openstack", "packet", "proxmoxve", "pxe", "qemu", "rackspace",
	"rackspace-onmetal", "scaleway", "stackit", "vagrant", "vagrant-virtualbox", "virtualbox",
	"vmware",
}

// ValidateID checks an OEM id. Unknown ids are refused unless allowUnknown, since a typo leaves a
// node whose initrd finds no platform and ignores its user-data.
func ValidateID(id string, allowUnknown bool) error {
	if !idPattern.MatchString(id) || len(id) > 64 {
		return errs.Invalidf("invalid OEM id %q: an id is lowercase letters, digits, '-' and '_' (pattern [a-z0-9][a-z0-9_-]*), e.g. --id openstack", id)
	}
	if allowUnknown || slices.Contains(KnownIDs, id) {
		return nil
	}
	return errs.Invalidf("unknown OEM id %q; Flatcar's OEM ids are: %s (use --allow-unknown-id for a platform this list lacks)", id, strings.Join(KnownIDs, ", "))
}

// ParseKernelArgs splits space-separated kernel arguments and checks each word.
func ParseKernelArgs(s string) ([]string, error) {
	if len(s) > maxValueLength {
		return nil, errs.Invalidf("kernel arguments are longer than %d bytes", maxValueLength)
	}
	if strings.ContainsAny(s, "\n\r\t") {
		return nil, errs.Invalidf("invalid kernel arguments %q: newlines and tabs are not allowed (separate arguments with spaces)", s)
	}
	words := strings.Fields(s)
	for _, w := range words {
		if !kernelArgWord.MatchString(w) {
			return nil, errs.Invalidf("invalid kernel argument %q: arguments may only contain letters, digits and . _ , : / = + @ - (no quotes, $, \\, ; or other GRUB script syntax)", w)
		}
	}
	return words, nil
}
