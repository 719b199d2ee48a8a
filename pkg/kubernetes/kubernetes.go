// Package kubernetes downloads what a CAPO node needs on the build host: kubeadm, kubelet and
// kubectl from the Kubernetes release bucket, crictl and the CNI plugins from their GitHub
// releases, each checked against its published .sha256 before anything boots, and cached.
package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Defaults. Kubernetes follows the mirror's release/stable.txt (the resolved version goes into
// the image name and the record, so a build stays reproducible); crictl and CNI fit its minor.
const (
	DefaultVersion    = Stable
	DefaultCNIVersion = "v1.7.1"
	// ExampleVersion is the exact version help texts show.
	ExampleVersion      = "v1.36.1"
	DefaultMirror       = "https://dl.k8s.io/release"
	DefaultGitHubMirror = "https://github.com"
)

// Options name the versions and where to get them.
type Options struct {
	Kubernetes, Crictl, CNI string // versions with the leading v; Kubernetes may be stable or 1.35 until Resolve
	// Crictl and CNI default (when empty) to DefaultCrictlFor/DefaultCNIFor the resolved Kubernetes.
	Arch         string // amd64 or arm64
	Mirror       string // replaces https://dl.k8s.io/release
	GitHubMirror string // replaces https://github.com (crictl, CNI)
	CacheDir     string // <CacheDir>/kubernetes/...
}

var versionRe = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Validate fills defaults and checks the versions and mirrors. A stable or minor Kubernetes
// version passes (Resolve makes it exact); crictl and CNI defaults need the exact one.
func (o *Options) Validate() error {
	o.Kubernetes = cmp.Or(o.Kubernetes, DefaultVersion)
	if _, err := ParseSpec(o.Kubernetes); err != nil {
		return err
	}
	if IsExact(o.Kubernetes) {
		o.Crictl = cmp.Or(o.Crictl, DefaultCrictlFor(o.Kubernetes))
		o.CNI = cmp.Or(o.CNI, DefaultCNIFor(o.Kubernetes))
	}
	o.Mirror = cmp.Or(o.Mirror, DefaultMirror)
	o.GitHubMirror = cmp.Or(o.GitHubMirror, DefaultGitHubMirror)
	o.Arch = cmp.Or(o.Arch, "amd64")
	for _, v := range []struct{ flag, val, eg string }{{"crictl-version", o.Crictl, "v1.36.0"}, {"cni-version", o.CNI, DefaultCNIVersion}} {
		if v.val != "" && !versionRe.MatchString(v.val) {
			return errs.Invalidf("invalid --%s %q: want a release tag with the v, e.g. %s", v.flag, v.val, v.eg)
		}
	}
	for _, m := range []struct{ flag, val string }{{"kubernetes-mirror", o.Mirror}, {"github-mirror", o.GitHubMirror}} {
		if !strings.HasPrefix(m.val, "http://") && !strings.HasPrefix(m.val, "https://") {
			return errs.Invalidf("invalid --%s %q: want an http(s) URL", m.flag, m.val)
		}
	}
	switch o.Arch {
	case "amd64", "arm64":
	default:
		return errs.Invalidf("invalid arch %q for Kubernetes downloads: amd64 or arm64", o.Arch)
	}
	o.Mirror = strings.TrimRight(o.Mirror, "/")
	o.GitHubMirror = strings.TrimRight(o.GitHubMirror, "/")
	return nil
}

// File is one download: Name is where it goes in the payload.
type File struct {
	Name string `json:"name"` // payload name: bin/kubeadm, crictl.tar.gz, cni-plugins.tgz
	URL  string `json:"url"`
}

// Files are the five downloads for o, in payload order (o resolved: exact versions).
func (o *Options) Files() []File {
	k := fmt.Sprintf("%s/%s/bin/linux/%s/", o.Mirror, o.Kubernetes, o.Arch)
	return []File{
		{Name: "bin/kubeadm", URL: k + "kubeadm"},
		{Name: "bin/kubelet", URL: k + "kubelet"},
		{Name: "bin/kubectl", URL: k + "kubectl"},
		{Name: "crictl.tar.gz", URL: fmt.Sprintf("%s/kubernetes-sigs/cri-tools/releases/download/%s/crictl-%s-linux-%s.tar.gz",
			o.GitHubMirror, o.Crictl, o.Crictl, o.Arch)},
		{Name: "cni-plugins.tgz", URL: fmt.Sprintf("%s/containernetworking/plugins/releases/download/%s/cni-plugins-linux-%s-%s.tgz",
			o.GitHubMirror, o.CNI, o.Arch, o.CNI)},
	}
}

// Stable is the --kubernetes-version that follows release/stable.txt of the mirror.
const Stable = "stable"

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
	case s == Stable:
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

// DefaultCrictlFor is crictl v<minor>.0 for Kubernetes v1.<minor>.x, as image-builder pins it.
func DefaultCrictlFor(k8s string) string {
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

// Downloaded is a verified file in the cache.
type Downloaded struct {
	File
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Cached bool   `json:"cached"`
}

// Set is the verified downloads of one build, in Files() order.
type Set struct {
	Options Options      `json:"-"`
	Files   []Downloaded `json:"files"`
}

// ChecksumError is a download whose sha256 differs from the published .sha256.
type ChecksumError struct {
	Name, URL, Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sha256 mismatch for %s (%s): expected %s (from %s.sha256), got %s; "+
		"the mirror serves a damaged or altered file, or a wrong .sha256", path.Base(e.URL), e.URL, e.Want, e.URL, e.Got)
}

// Download fetches the .sha256 of every file, then each file unless the cache holds one with
// that hash, all through client (its timeouts, retries and deadline). Nothing unverified is
// kept. log (nil: none) gets one line per file.
func Download(ctx context.Context, client *httpx.Client, o Options, log io.Writer) (*Set, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !IsExact(o.Kubernetes) {
		return nil, fmt.Errorf("kubernetes: version %q not resolved (call Options.Resolve first)", o.Kubernetes)
	}
	log = cmp.Or(log, io.Discard)
	files := o.Files()
	set := &Set{Options: o, Files: make([]Downloaded, len(files))}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			d, err := get(ctx, client, o, f)
			set.Files[i], errs[i] = d, err
			if err == nil {
				how := "downloaded"
				if d.Cached {
					how = "cached"
				}
				fmt.Fprintf(log, "%s: %s, sha256 %s ok\n", f.Name, how, d.SHA256[:16])
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A checksum mismatch is the most important message: report it before network errors.
	if i := slices.IndexFunc(errs, func(err error) bool { return errors.As(err, new(*ChecksumError)) }); i >= 0 {
		return nil, errs[i]
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return set, nil
}

// cachePath is <cache>/kubernetes/<version>/<arch>/<file>: the content is fixed by the
// version, whichever mirror served it (the hash is checked on every use).
func (o Options) cachePath(f File) string {
	v := o.Kubernetes
	switch f.Name {
	case "crictl.tar.gz":
		v = "crictl-" + o.Crictl
	case "cni-plugins.tgz":
		v = "cni-" + o.CNI
	}
	return filepath.Join(o.CacheDir, "kubernetes", v, o.Arch, path.Base(f.URL))
}

func get(ctx context.Context, client *httpx.Client, o Options, f File) (Downloaded, error) {
	d := Downloaded{File: f, Path: o.cachePath(f)}
	want, err := fetchSHA256(ctx, client, o, f.URL+".sha256") // the published checksum
	if err != nil {
		return d, err
	}
	d.SHA256 = want
	if got, n, err := digest.SHA256(d.Path); err == nil && got == want {
		d.Bytes, d.Cached = n, true
		return d, nil
	}
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o755); err != nil {
		return d, fmt.Errorf("cannot create the download cache: %w", err)
	}
	got, err := client.Download(ctx, f.URL, d.Path, httpx.Digest{Algo: "sha256", Hex: want}, 0o755)
	var de *httpx.DigestError
	if errors.As(err, &de) {
		return d, &ChecksumError{Name: f.Name, URL: f.URL, Want: want, Got: de.Got}
	}
	if err != nil {
		return d, hint(err, o, f.URL)
	}
	d.Bytes = got.Bytes
	return d, nil
}

// hint says what to check when a mirror does not serve url: a missing file (the version, or
// what the mirror carries), a server error or a refusal (the mirror, not the version), or no
// connection (a mirror the user configured is down; without one, the site may be air-gapped).
func hint(err error, o Options, url string) error {
	flag, mirror, configured := mirrorOf(o, url)
	var se *httpx.StatusError
	if errors.As(err, &se) {
		switch {
		case se.Code == http.StatusNotFound || se.Code == http.StatusGone:
			if configured {
				return fmt.Errorf("%w (is the version right, and does %s %s carry it?)", err, flag, mirror)
			}
			return fmt.Errorf("%w (is the version right?)", err)
		case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden:
			return fmt.Errorf("%w (%s refused access: does it need credentials, or does a proxy block it?)", err, mirror)
		case se.Code >= 500 && configured:
			return fmt.Errorf("%w (a server error of %s %s, not a missing file: check that mirror, or retry later)", err, flag, mirror)
		case se.Code >= 500:
			return fmt.Errorf("%w (a server error of %s, not a missing file: retry later, or point %s at a mirror)", err, mirror, flag)
		}
		return err
	}
	if httpx.IsStalled(err) || errors.As(err, new(*httpx.DeadlineError)) || errors.Is(err, context.Canceled) {
		return err
	}
	if configured {
		return fmt.Errorf("%w (%s %s could not be reached or dropped the connection: is it up, and is that its address?)", err, flag, mirror)
	}
	return fmt.Errorf("%w (air-gapped? point --kubernetes-mirror/--github-mirror at a mirror)", err)
}

// mirrorOf names the flag and the mirror url comes from, and whether the user configured it.
func mirrorOf(o Options, url string) (flag, mirror string, configured bool) {
	flag, mirror, def := "--kubernetes-mirror", o.Mirror, DefaultMirror
	if !strings.HasPrefix(url, cmp.Or(o.Mirror, DefaultMirror)) && strings.HasPrefix(url, cmp.Or(o.GitHubMirror, DefaultGitHubMirror)) {
		flag, mirror, def = "--github-mirror", o.GitHubMirror, DefaultGitHubMirror
	}
	mirror = cmp.Or(mirror, def)
	return flag, redact.URL(mirror), strings.TrimSuffix(mirror, "/") != def
}

// fetchSHA256 reads a .sha256 file: "hex" or "hex  name" (sha256sum's format).
func fetchSHA256(ctx context.Context, client *httpx.Client, o Options, url string) (string, error) {
	b, err := client.GetSmall(ctx, url, 64<<10)
	if err != nil {
		return "", hint(err, o, url)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return ParseSHA256(line, url)
}

// ParseSHA256 accepts "hex" and "hex  name".
func ParseSHA256(line, from string) (string, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", fmt.Errorf("%s is empty; want a sha256 hex digest", from)
	}
	sum := strings.ToLower(fields[0])
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("%s does not start with a sha256 hex digest: %q", from, strings.TrimSpace(line))
	}
	return sum, nil
}

// WritePayload lays the downloads out in dir as the provisioning scripts expect:
// bin/kubeadm bin/kubelet bin/kubectl crictl.tar.gz cni-plugins.tgz versions.env (which the
// scripts read the versions from).
func (s *Set) WritePayload(dir string) error {
	for _, f := range s.Files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := linkOrCopy(f.Path, dst); err != nil {
			return fmt.Errorf("payload %s: %w", f.Name, err)
		}
	}
	o := s.Options
	env := fmt.Sprintf("KUBERNETES_VERSION=%s\nCRICTL_VERSION=%s\nCNI_VERSION=%s\nARCH=%s\n", o.Kubernetes, o.Crictl, o.CNI, o.Arch)
	return os.WriteFile(filepath.Join(dir, "versions.env"), []byte(env), 0o644)
}

// ByName returns the download for a payload name.
func (s *Set) ByName(name string) (Downloaded, bool) {
	for _, f := range s.Files {
		if f.Name == name {
			return f, true
		}
	}
	return Downloaded{}, false
}

func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
