package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
)

// stable is the --kubernetes-version that follows release/stable.txt of the mirror.
const stable = "stable"

var (
	minorRe = regexp.MustCompile(`^v?(\d+)\.(\d+)$`)
	exactRe = regexp.MustCompile(`^v(\d+)\.(\d+)\.\d+(-[0-9A-Za-z.-]+)?$`)
)

// Spec is a parsed --kubernetes-version: stable, a minor (1.35, v1.35) or an exact v1.35.2.
type Spec struct {
	Exact string // v1.35.2 when the version needs no lookup
	Minor string // 1.35 for the minor form
}

// ParseSpec reads the forms --kubernetes-version takes.
func ParseSpec(s string) (Spec, error) {
	switch {
	case s == stable:
		return Spec{}, nil
	case exactRe.MatchString(s):
		return Spec{Exact: s}, nil
	case minorRe.MatchString(s):
		return Spec{Minor: strings.TrimPrefix(s, "v")}, nil
	}
	eg := ExampleVersion
	if exactRe.MatchString("v" + s) {
		eg = "v" + s // the usual slip: the tag without its v
	}
	return Spec{}, errs.Invalidf("invalid --kubernetes-version %q: want stable, a minor such as 1.35 (its latest patch), or an exact release tag with the v, e.g. %s", s, eg)
}

// IsExact reports whether s names one release (no marker file to read).
func IsExact(s string) bool { return exactRe.MatchString(s) }

// Marker is the file of the mirror that names the version of a spec: release/stable.txt or
// release/stable-1.35.txt in dl.k8s.io's layout (the mirror is .../release).
func (s Spec) Marker(mirror string) string {
	mirror = strings.TrimRight(mirror, "/")
	if s.Minor != "" {
		return mirror + "/stable-" + s.Minor + ".txt"
	}
	return mirror + "/stable.txt"
}

// MinorOf returns 1 and 35 for v1.35.2; ok is false for anything that is not an exact tag.
func MinorOf(v string) (major, minor int, ok bool) {
	m := exactRe.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// ResolveVersion turns a --kubernetes-version into an exact release tag, reading the marker file
// of mirror ("" is DefaultMirror) for stable and minors. Errors name the URL and the fix.
func ResolveVersion(ctx context.Context, c *httpx.Client, mirror, version string) (string, error) {
	spec, err := ParseSpec(version)
	if err != nil {
		return "", err
	}
	if spec.Exact != "" {
		return spec.Exact, nil
	}
	if c == nil {
		c = httpx.New(httpx.Options{Retries: 2})
	}
	url := spec.Marker(cmp.Or(mirror, DefaultMirror))
	fix := "mirror that file from https://dl.k8s.io/release, or give an exact --kubernetes-version such as v1.35.2"
	b, err := c.GetSmall(ctx, url, 256)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if httpx.IsNotFound(err) {
			if spec.Minor != "" {
				return "", fmt.Errorf("Kubernetes %s: %s does not exist (404): no such minor release on this mirror, or the mirror lacks the marker file; %s", spec.Minor, url, fix)
			}
			return "", fmt.Errorf("--kubernetes-version stable: %s does not exist (404); %s", url, fix)
		}
		return "", fmt.Errorf("--kubernetes-version %s: cannot read %s: %v; %s", version, url, err, fix)
	}
	got := strings.TrimSpace(string(b))
	if !exactRe.MatchString(got) {
		if len(got) > 40 {
			got = got[:40] + "..."
		}
		return "", fmt.Errorf("--kubernetes-version %s: %s holds %q, not a release tag such as v1.35.2; %s", version, url, got, fix)
	}
	if spec.Minor != "" && !strings.HasPrefix(got, "v"+spec.Minor+".") {
		return "", fmt.Errorf("--kubernetes-version %s: %s names %s, another minor; fix the mirror's marker file, or give an exact --kubernetes-version", version, url, got)
	}
	return got, nil
}

// defaultCrictlFor is crictl v<minor>.0 for Kubernetes v1.<minor>.x, as image-builder pins it.
func defaultCrictlFor(k8s string) string {
	major, minor, ok := MinorOf(k8s)
	if !ok {
		return ""
	}
	return fmt.Sprintf("v%d.%d.0", major, minor)
}

// DefaultCNIFor is the CNI plugins release that was current when that Kubernetes minor came out.
func DefaultCNIFor(k8s string) string {
	_, minor, ok := MinorOf(k8s)
	switch {
	case !ok:
		return ""
	case minor >= 33:
		return DefaultCNIVersion
	case minor >= 31:
		return "v1.6.2"
	default:
		return "v1.5.1"
	}
}

// Resolve makes o.Kubernetes an exact version (stable and minors through the mirror's marker
// files) and fills the crictl and CNI versions that fit it when they were left empty.
func (o *Options) Resolve(ctx context.Context, c *httpx.Client) error {
	o.Kubernetes = cmp.Or(o.Kubernetes, DefaultVersion)
	v, err := ResolveVersion(ctx, c, o.Mirror, o.Kubernetes)
	if err != nil {
		return err
	}
	o.Kubernetes = v
	return o.Validate()
}
