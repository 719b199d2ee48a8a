package imagebuild

import (
	"errors"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

func TestParseDiskSize(t *testing.T) {
	for _, s := range []string{"12x", "", "0", "-4G", "G", "1.5G"} {
		if _, err := ParseDiskSize(s); !errors.Is(err, errs.ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid --disk-size ") {
			t.Errorf("%q: %v", s, err)
		}
	}
	for s, want := range map[string]int64{"20G": 20 << 30, "20GiB": 20 << 30, "512m": 512 << 20, "4096": 4096, " 1T ": 1 << 40, "64KB": 64 << 10} {
		if n, err := ParseDiskSize(s); err != nil || n != want {
			t.Errorf("%q: %d %v, want %d", s, n, err, want)
		}
	}
}
