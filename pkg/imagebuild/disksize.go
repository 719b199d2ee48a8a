package imagebuild

import (
	"strconv"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// ParseDiskSize reads --disk-size as 20G / 20GiB / 512M / bytes (binary units) for
// Options.DiskSize; its error wraps errs.ErrInvalid. Validate then wants whole MiB.
func ParseDiskSize(s string) (int64, error) {
	num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"))
	mult := int64(1)
	if n := len(num); n > 0 {
		if i := strings.IndexByte("KMGT", num[n-1]); i >= 0 { // K = 1<<10 ... T = 1<<40
			mult, num = 1<<(10*(i+1)), num[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 {
		return 0, errs.Invalidf("invalid --disk-size %q: not a positive size (e.g. 20G, 20GiB or a number of bytes)", s)
	}
	return v * mult, nil
}
