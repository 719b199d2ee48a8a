package containerd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Downloaded is a verified file in the cache.
type Downloaded struct {
	URL    string `json:"url"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Cached bool   `json:"cached"`
}

// Set is the verified containerd tarball and runc of one choice.
type Set struct {
	Options Options    `json:"-"`
	Tarball Downloaded `json:"tarball"`
	Runc    Downloaded `json:"runc"`
}

// ChecksumError is a download whose sha256 differs from the published one.
type ChecksumError struct{ URL, SumsURL, Want, Got string }

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sha256 mismatch for %s (%s): expected %s (from %s), got %s; the mirror serves a damaged or altered file, or a wrong checksum file",
		path.Base(e.URL), redact.URL(e.URL), e.Want, redact.URL(e.SumsURL), e.Got)
}

// Download fetches the published checksums, then the tarball and runc unless the cache holds
// them with those hashes, through client. Nothing unverified is kept. log gets a line per file.
func Download(ctx context.Context, client *httpx.Client, o Options, log io.Writer) (*Set, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log = cmp.Or(log, io.Discard)
	set := &Set{Options: o}
	var err error
	if set.Tarball, err = get(ctx, client, o, o.TarballURL(), o.TarballURL()+".sha256sum", "containerd-"+o.Version, log); err != nil {
		return nil, err
	}
	if set.Runc, err = get(ctx, client, o, o.RuncURL(), o.RuncSumsURL(), "runc-"+o.Runc, log); err != nil {
		return nil, err
	}
	return set, nil
}

func get(ctx context.Context, client *httpx.Client, o Options, url, sumsURL, dir string, log io.Writer) (Downloaded, error) {
	name := path.Base(url)
	d := Downloaded{URL: url, Path: filepath.Join(o.CacheDir, "containerd", dir, o.Arch, name)}
	b, err := client.GetSmall(ctx, sumsURL, 64<<10)
	if err != nil {
		return d, hint(err, o)
	}
	if d.SHA256, err = sumFor(string(b), name, sumsURL); err != nil {
		return d, err
	}
	if got, _, err := digest.SHA256(d.Path); err == nil && got == d.SHA256 {
		d.Cached = true
		fmt.Fprintf(log, "%s: cached, sha256 %s ok\n", name, d.SHA256[:16])
		return d, nil
	}
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o755); err != nil {
		return d, fmt.Errorf("cannot create the download cache: %w", err)
	}
	_, err = client.Download(ctx, url, d.Path, httpx.Digest{Algo: "sha256", Hex: d.SHA256}, 0o755)
	var de *httpx.DigestError
	if errors.As(err, &de) {
		return d, &ChecksumError{URL: url, SumsURL: sumsURL, Want: d.SHA256, Got: de.Got}
	}
	if err != nil {
		return d, hint(err, o)
	}
	fmt.Fprintf(log, "%s: downloaded, sha256 %s ok\n", name, d.SHA256[:16])
	return d, nil
}

// sumFor finds name's sha256 in a sha256sum file: one "hex  name" line per asset (runc's), or
// a single line (containerd's .sha256sum, whose name may be missing).
func sumFor(sums, name, from string) (string, error) {
	lines := strings.Split(strings.TrimSpace(sums), "\n")
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 2 && strings.TrimPrefix(f[1], "*") == name {
			return kubernetes.ParseSHA256(l, from)
		}
	}
	if len(lines) == 1 && len(strings.Fields(lines[0])) == 1 {
		return kubernetes.ParseSHA256(lines[0], from)
	}
	return "", fmt.Errorf("%s has no sha256 for %s", redact.URL(from), name)
}

// hint says what to check when the mirror does not serve a file.
func hint(err error, o Options) error {
	mirror := redact.URL(o.GitHubMirror)
	var se *httpx.StatusError
	if errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusGone) {
		return fmt.Errorf("%w (are --containerd-version %s and --runc-version %s releases, and does --github-mirror %s carry them in GitHub's layout?)", err, o.Version, o.Runc, mirror)
	}
	if errors.As(err, &se) || httpx.IsStalled(err) || errors.As(err, new(*httpx.DeadlineError)) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w (air-gapped? point --github-mirror at a mirror of github.com's release downloads; now %s)", err, mirror)
}
