package capo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NewestCAPIVersion is the newest CAPI release this tool knows: the one whose API types it
// links (go.mod's sigs.k8s.io/cluster-api).
const NewestCAPIVersion = "1.13.0"

// CAPIVersion is a CAPI release number.
type CAPIVersion struct{ Major, Minor, Patch int }

// ParseCAPIVersion accepts "1.4.0", "v1.4.0" and "1.4" (patch 0).
func ParseCAPIVersion(s string) (CAPIVersion, error) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return CAPIVersion{}, fmt.Errorf("CAPI version %q is not MAJOR.MINOR[.PATCH], e.g. 1.8.4", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return CAPIVersion{}, fmt.Errorf("CAPI version %q is not MAJOR.MINOR[.PATCH], e.g. 1.8.4", s)
		}
		n[i] = v
	}
	return CAPIVersion{n[0], n[1], n[2]}, nil
}

func (v CAPIVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders versions.
func (v CAPIVersion) Less(o CAPIVersion) bool {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{o.Major, o.Minor, o.Patch}) < 0
}

// base64FilesDecoded: CABPK's Ignition output decodes base64 files from CAPI 1.2.0.
func (v CAPIVersion) base64FilesDecoded() bool { return !v.Less(CAPIVersion{1, 2, 0}) }

// kcpFormatMutable: the KubeadmControlPlane webhook accepts a format change from 1.4.0 and
// in the 1.3.6 and 1.2.12 patch releases (kubernetes-sigs/cluster-api#8242).
func (v CAPIVersion) kcpFormatMutable() bool {
	switch {
	case !v.Less(CAPIVersion{1, 4, 0}):
		return true
	case v.Major == 1 && v.Minor == 3:
		return v.Patch >= 6
	case v.Major == 1 && v.Minor == 2:
		return v.Patch >= 12
	}
	return false
}
