package oem

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/btrfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// SetOptions are the requested OEM settings. Values are validated by Validate before any write.
type SetOptions struct {
	ID             string
	LinuxAppend    string // extra kernel arguments, space separated, added to linux_append
	KeepAutologin  bool
	AllowUnknownID bool
	ProtectiveMBR  bool // replace a hybrid MBR with a protective one
	// Time is what the edit stamps where the filesystem records one (btrfs inode times); zero:
	// SOURCE_DATE_EPOCH, else now. A build passes its epoch.
	Time time.Time
}

// Validate checks every value; a failure wraps errs.ErrInvalid (usage error, exit 2).
func (o SetOptions) Validate() ([]string, error) {
	if o.ID == "" {
		return nil, errs.Invalidf("--id is required, e.g. --id openstack (Flatcar's OEM ids: %s)", strings.Join(knownIDs, ", "))
	}
	if err := ValidateID(o.ID, o.AllowUnknownID); err != nil {
		return nil, err
	}
	return ParseKernelArgs(o.LinuxAppend)
}

// SetResult reports what Set did.
type SetResult struct {
	Image       string   `json:"image"`
	Partition   int      `json:"partition"`
	Filesystem  string   `json:"filesystem"`
	Before      Settings `json:"before"`
	After       Settings `json:"after"`
	Changed     bool     `json:"changed"`
	Created     bool     `json:"createdGrubCfg"`
	MBRReplaced bool     `json:"mbrReplaced"`
}

// plan computes the new grub.cfg for the current content (nil when it does not exist).
func plan(current []byte, opts SetOptions, extra []string) []byte {
	g := parseGrubConfig(current)
	s := g.Settings()
	words := strings.Fields(s.LinuxAppend)
	if !opts.KeepAutologin {
		words = slices.DeleteFunc(words, func(w string) bool { return w == Autologin })
	}
	for _, w := range extra {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	g.Set(varOEMID, opts.ID)
	if newAppend := strings.Join(words, " "); newAppend != s.LinuxAppend || current == nil {
		g.Set(varLinuxAppend, newAppend)
	}
	return g.Bytes()
}

// Set applies opts to a writable image in place. Nothing is written when the image already has
// the requested settings (idempotent) or when anything fails before the write.
func Set(img *disk.Image, opts SetOptions) (SetResult, error) {
	extra, err := opts.Validate()
	if err != nil {
		return SetResult{}, err
	}
	res := SetResult{Image: img.Path}
	var mbr disk.MBRInfo
	if opts.ProtectiveMBR {
		if mbr, err = disk.ReadMBR(img.Disk); err != nil {
			return res, fmt.Errorf("%s: %w", img.Path, err)
		}
	}
	p, fsys, err := partition(img)
	if err != nil {
		return res, err
	}
	res.Partition, res.Filesystem = p.Number, fsys.Type()
	if b, ok := fsys.(*btrfs.FS); ok && !opts.Time.IsZero() { // go-diskfs' ext4 stamps time.Now
		b.Now = opts.Time
	}
	current, err := fsys.ReadFile(grubCfgPath)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("%s: reading OEM grub.cfg: %w", img.Path, err)
		}
		current, res.Created = nil, true
	} else if err := checkGrubConfig(current); err != nil {
		return res, fmt.Errorf("%s: OEM %w", img.Path, err)
	}
	res.Before = parseGrubConfig(current).Settings()
	next := plan(current, opts, extra)
	res.After = parseGrubConfig(next).Settings()
	if res.Created || string(next) != string(current) {
		// Content too big for a btrfs OEM's in-place rewrite gets a message saying so and what to
		// do, not the btrfs package's "unsupported layout".
		err := fsys.WriteFile(grubCfgPath, next)
		if b, ok := fsys.(*btrfs.FS); ok && errors.Is(err, btrfs.ErrNoRoom) {
			err = &noRoomError{File: "/" + grubCfgPath, Size: len(next), MaxStored: b.MaxInline(), detail: err}
		}
		if err != nil {
			return res, fmt.Errorf("%s: writing OEM grub.cfg (%s): %w", img.Path, fsys.Type(), err)
		}
		res.Changed = true
	}
	if opts.ProtectiveMBR && mbr.Kind == disk.MBRHybrid {
		if err := disk.WriteProtectiveMBR(img.Disk); err != nil {
			return res, fmt.Errorf("%s: writing the protective MBR: %w", img.Path, err)
		}
		res.MBRReplaced, res.Changed = true, true
	}
	return res, nil
}

// The OEM grub.cfg is sourced by GRUB and its values sit inside GRUB-script double quotes, so a
// value is accepted only if it cannot leave the quotes or expand anything: no `"`, `$`, `\`,
// `;`, newline, backquote or space inside a word.
var (
	idPattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	kernelArgWord  = regexp.MustCompile(`^[A-Za-z0-9._,:/=+@-]+$`)
	maxValueLength = 1024
)

// knownIDs are the platform ids Flatcar's initrd (Ignition, afterburn/coreos-metadata) accepts as
// flatcar.oem.id, from Flatcar's image types and Ignition's platform list.
var knownIDs = []string{
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
	if allowUnknown || slices.Contains(knownIDs, id) {
		return nil
	}
	return errs.Invalidf("unknown OEM id %q; Flatcar's OEM ids are: %s (use --allow-unknown-id for a platform this list lacks)", id, strings.Join(knownIDs, ", "))
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
