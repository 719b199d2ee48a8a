package sysext

import (
	"cmp"

	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// InspectOptions are `sysext inspect`'s: the NAME the image is linked as (default: from the
// file name), the host to compare with (Flatcar's constants for Arch, or an os-release file),
// and whether to decompress every file's data.
type InspectOptions struct {
	Name, OSRelease, Arch string
	Verify                bool
}

// Report is what `sysext inspect` says of an image; its JSON is part of the CLI's interface.
type Report struct {
	*Info
	Name       string   `json:"name"`
	Release    Release  `json:"extensionRelease"`
	Problems   []string `json:"problems"`
	Ignored    []string `json:"ignored"`
	NotRoot    []string `json:"notRootOwned"`
	Host       Host     `json:"host"`
	WouldMerge bool     `json:"wouldMerge"`
	Reason     string   `json:"reason"`
	Verified   bool     `json:"dataVerified"`
}

// Inspect checks o, reads the image at path and tells whether systemd-sysext would merge it
// on the host. An image it would not merge is a report, not an error.
func Inspect(path string, o InspectOptions) (*Report, error) {
	if o.Name != "" {
		if err := validName(o.Name); err != nil {
			return nil, err
		}
	}
	if _, err := Arch(o.Arch); err != nil {
		return nil, err
	}
	host := FlatcarHost(o.Arch)
	if o.OSRelease != "" {
		data, err := infile.ReadFile("--os-release", o.OSRelease, infile.OSRelease)
		if err != nil {
			return nil, err
		}
		if host, err = HostFromOSRelease(data, o.Arch, o.OSRelease); err != nil {
			return nil, err
		}
	}
	info, err := Open(path)
	if err != nil {
		return nil, err
	}
	name := cmp.Or(o.Name, info.DefaultName())
	if o.Verify {
		if err := info.Verify(); err != nil {
			return nil, err
		}
	}
	r := &Report{Info: info, Name: name, Release: info.Releases[name], Problems: orEmpty(info.Problems(name)),
		Ignored: orEmpty(info.Ignored()), NotRoot: orEmpty(info.NotRootOwned()), Host: host, Verified: o.Verify}
	if r.Release == nil {
		r.Release = Release{}
	}
	r.WouldMerge, r.Reason = info.WouldMerge(name, host)
	return r, nil
}

// orEmpty makes a nil list empty, so that the JSON report shows [] and not null.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
