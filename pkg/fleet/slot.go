package fleet

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// Slot is what an image is for: one channel, one Kubernetes minor, one build method. A fleet
// keeps the newest image of every slot it supports in every cloud.
type Slot struct {
	Channel string `json:"channel"`
	Minor   string `json:"kubernetesMinor"` // v1.35
	Method  string `json:"method"`
}

func (s Slot) String() string { return s.Channel + "/" + s.Minor + "/" + s.Method }

// Image is one image of this tool in one cloud, with the slot it fills.
type Image struct {
	Cloud             string    `json:"cloud"`
	ID                string    `json:"id"`
	Name              string    `json:"name"`
	Slot              Slot      `json:"slot"`
	FlatcarVersion    string    `json:"flatcarVersion"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	Status            string    `json:"status"`
	Hidden            bool      `json:"hidden"`
	Created           time.Time `json:"created"`
	Hash              string    `json:"sha512,omitempty"`
}

// ImageName is `build`'s default name for a slot's image, flatcar-<channel>-<version>-kube-<k8s>
// with -sysext for the sysext method (build.DefaultImageName; kept equal by a test).
func ImageName(method, channel, flatcarVersion, k8s string) string {
	n := fmt.Sprintf("flatcar-%s-%s-kube-%s", channel, flatcarVersion, k8s)
	if method == "sysext" {
		n += "-sysext"
	}
	return n
}

var nameRe = regexp.MustCompile(`^flatcar-([a-z]+)-(\d+\.\d+\.\d+)-kube-(v\d+\.\d+\.\d+[^-]*)(-sysext)?$`)

// imageFromGlance reads an image's slot from the properties upload sets (flatcar_channel,
// flatcar_capo_method, os_version, kubernetes_version), falling back to build's default name for
// images uploaded before those properties existed. ok is false when neither tells the slot: such
// an image is never planned against or pruned.
func imageFromGlance(cloud string, img images.Image) (Image, bool) {
	prop := func(k string) string { s, _ := img.Properties[k].(string); return s }
	im := Image{Cloud: cloud, ID: img.ID, Name: img.Name, Status: string(img.Status), Hidden: img.Hidden,
		Created: img.CreatedAt, Hash: prop("os_hash_value")}
	im.Slot.Channel, im.Slot.Method = prop(glance.PropertyChannel), prop(glance.PropertyMethod)
	im.FlatcarVersion, im.KubernetesVersion = prop("os_version"), prop("kubernetes_version")
	if m := nameRe.FindStringSubmatch(img.Name); m != nil {
		method := "packer"
		if m[4] != "" {
			method = "sysext"
		}
		im.Slot.Channel = cmp.Or(im.Slot.Channel, m[1])
		im.FlatcarVersion = cmp.Or(im.FlatcarVersion, m[2])
		im.KubernetesVersion = cmp.Or(im.KubernetesVersion, m[3])
		im.Slot.Method = cmp.Or(im.Slot.Method, method)
	}
	im.Slot.Minor = minor(im.KubernetesVersion)
	ok := im.Slot.Channel != "" && im.Slot.Method != "" && im.Slot.Minor != "" && im.FlatcarVersion != ""
	return im, ok
}

// minor is v1.35 for v1.35.2 (or 1.35.2); "" for what is not a version.
func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || !isNum(parts[0]) || !isNum(parts[1]) {
		return ""
	}
	return "v" + parts[0] + "." + parts[1]
}

func isNum(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && s != ""
}

// newer orders two images of one slot: higher Flatcar version, then higher Kubernetes patch,
// then created later. Versions decide, not upload times: a rebuilt old release stays old.
func newer(a, b Image) bool {
	return cmp.Or(compareVersions(a.FlatcarVersion, b.FlatcarVersion), compareVersions(a.KubernetesVersion, b.KubernetesVersion),
		a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) > 0
}

// compareVersions compares dotted numbers (4459.2.0, v1.35.2) field by field; a pre-release
// suffix (-rc.1) sorts below the release.
func compareVersions(a, b string) int {
	split := func(v string) ([]int, bool) {
		v = strings.TrimPrefix(v, "v")
		pre := false
		if i := strings.IndexAny(v, "-+"); i >= 0 {
			pre, v = v[i] == '-', v[:i]
		}
		var out []int
		for _, f := range strings.Split(v, ".") {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
		return out, pre
	}
	av, apre := split(a)
	bv, bpre := split(b)
	// Missing fields count as 0: 1.35 is 1.35.0.
	for len(av) < len(bv) {
		av = append(av, 0)
	}
	for len(bv) < len(av) {
		bv = append(bv, 0)
	}
	if c := slices.Compare(av, bv); c != 0 {
		return c
	}
	switch {
	case apre && !bpre:
		return -1
	case bpre && !apre:
		return 1
	}
	return 0
}
