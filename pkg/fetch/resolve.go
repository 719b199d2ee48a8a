package fetch

import (
	"bytes"
	"context"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// Resolve turns an alias (current, current-YYYY) into the release number named by the server's
// version.txt, and checks that a pinned version exists on the server. The returned release always
// carries a number, so every later URL points into that version's own directory.
func Resolve(ctx context.Context, c *httpx.Client, r release.Release) (release.Release, error) {
	if err := r.Validate(); err != nil {
		return r, err
	}
	url := r.URL(release.VersionFile)
	b, err := c.GetSmall(ctx, url, 64<<10)
	switch {
	case httpx.IsNotFound(err) && release.IsAlias(r.Version):
		return r, fmt.Errorf("the %s channel has no %q release for %s on this server: %w", r.Channel, r.Version, r.Arch, err)
	case httpx.IsNotFound(err):
		return r, fmt.Errorf("version %s does not exist on the %s channel for %s: %w", r.Version, r.Channel, r.Arch, err)
	case err != nil:
		return r, fmt.Errorf("cannot resolve %s %s: %w", r.Channel, r.Version, err)
	}
	v, err := release.ParseVersionTxt(bytes.NewReader(b))
	if err != nil {
		return r, fmt.Errorf("%s: %w", url, err)
	}
	if !release.IsAlias(r.Version) && v != r.Version {
		return r, fmt.Errorf("%s names version %s, not the requested %s", url, v, r.Version)
	}
	r.Version = v
	return r, nil
}
