package kubernetes

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
)

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
