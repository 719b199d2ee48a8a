package capo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NewestCAPIVersion is the newest CAPI release this tool knows: the one whose API types and
// validation it links (go.mod's sigs.k8s.io/cluster-api and sigs.k8s.io/cluster-api/api).
const NewestCAPIVersion = "1.14.2"

// v1beta1Warning is what `manifests --capi-api v1beta1` prints: the API's end is announced.
const v1beta1Warning = "CAPI v1.16 stops serving the v1beta1 API (core, CABPK, KCP) that --capi-api v1beta1 renders: " +
	"use --capi-api v1beta2 (the default, CAPI 1.11+) before upgrading the management cluster to CAPI v1.16"

// checkSupported refuses a release newer than the API types this build links: its fields and
// validation rules are unknown here.
func (v capiVersion) checkSupported() error {
	newest, _ := parseCAPIVersion(NewestCAPIVersion)
	if newest.Major < v.Major || newest.Major == v.Major && newest.Minor < v.Minor {
		return fmt.Errorf("CAPI %d.%d is newer than this flatcar-capo knows (CAPI %s's types and validation, for CAPI 1.12 to 1.14 management clusters and the older releases' pitfalls): "+
			"give --capi-version %d.%d, or use a flatcar-capo that knows CAPI %d.%d", v.Major, v.Minor, NewestCAPIVersion, newest.Major, newest.Minor, v.Major, v.Minor)
	}
	return nil
}

// capiVersion is a CAPI release number.
type capiVersion struct{ Major, Minor, Patch int }

// parseCAPIVersion accepts "1.4.0", "v1.4.0" and "1.4" (patch 0).
func parseCAPIVersion(s string) (capiVersion, error) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return capiVersion{}, fmt.Errorf("CAPI version %q is not MAJOR.MINOR[.PATCH], e.g. 1.8.4", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return capiVersion{}, fmt.Errorf("CAPI version %q is not MAJOR.MINOR[.PATCH], e.g. 1.8.4", s)
		}
		n[i] = v
	}
	return capiVersion{n[0], n[1], n[2]}, nil
}

func (v capiVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders versions.
func (v capiVersion) Less(o capiVersion) bool {
	return slices.Compare([]int{v.Major, v.Minor, v.Patch}, []int{o.Major, o.Minor, o.Patch}) < 0
}

// base64FilesDecoded: CABPK's Ignition output decodes base64 files from CAPI 1.2.0.
func (v capiVersion) base64FilesDecoded() bool { return !v.Less(capiVersion{1, 2, 0}) }

// contentFormatKnown: KubeadmConfigSpec's files[].contentFormat exists from CAPI 1.14.0.
func (v capiVersion) contentFormatKnown() bool { return !v.Less(capiVersion{1, 14, 0}) }

// kcpFormatMutable: the KubeadmControlPlane webhook accepts a format change from 1.4.0 and
// in the 1.3.6 and 1.2.12 patch releases (kubernetes-sigs/cluster-api#8242).
func (v capiVersion) kcpFormatMutable() bool {
	switch {
	case !v.Less(capiVersion{1, 4, 0}):
		return true
	case v.Major == 1 && v.Minor == 3:
		return v.Patch >= 6
	case v.Major == 1 && v.Minor == 2:
		return v.Patch >= 12
	}
	return false
}
