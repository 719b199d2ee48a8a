package imagebuild

import (
	"strconv"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// ParseDiskSize reads --disk-size as 20G / 20GiB / 512M / bytes (binary units) for
// Options.DiskSize; its error wraps errs.ErrInvalid. Validate then wants whole MiB.
func ParseDiskSize(s string) (int64, error) {
	n, ok := parseSize(s)
	if !ok {
		return 0, errs.Invalidf("invalid --disk-size %q: not a positive size (e.g. 20G, 20GiB or a number of bytes)", s)
	}
	return n, nil
}

func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"))
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult, s = 1<<10, s[:n-1]
		case 'M':
			mult, s = 1<<20, s[:n-1]
		case 'G':
			mult, s = 1<<30, s[:n-1]
		case 'T':
			mult, s = 1<<40, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v * mult, true
}
