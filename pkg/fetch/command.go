package fetch

import (
	"context"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// Request is `fetch`'s: what to fetch (Options; its Keyring comes from KeyringFile), through
// which network settings.
type Request struct {
	Options
	Network httpx.Options
	// KeyringFile replaces the embedded Flatcar key; unused with InsecureSkipVerify.
	KeyringFile string
}

// FetchRelease checks r (release, image, network, output, keyring) before any request, then
// fetches the image as Fetch does (with the default cache unless r names one).
func FetchRelease(ctx context.Context, r Request) (*Result, error) {
	if err := validateSource(&r.Release, r.Image, &r.Network); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.OutputFile != "" { // the default name needs the resolved version: Fetch checks it then
		if err := atomicfile.CheckPath(r.OutputFile); err != nil {
			return nil, err
		}
	}
	var err error
	if r.Keyring, err = verify.KeyringInForce(r.KeyringFile, r.InsecureSkipVerify); err != nil {
		return nil, err
	}
	return Fetch(ctx, httpx.New(r.Network), r.Options)
}

// validateSource normalises the architecture and checks the release, the image and the
// network settings that release and fetch share; its errors wrap errs.ErrInvalid.
func validateSource(rel *release.Release, image string, net *httpx.Options) error {
	a, err := release.ParseArch(rel.Arch)
	if err != nil {
		return err
	}
	rel.Arch = a
	if err := rel.Validate(); err != nil {
		return err
	}
	if err := release.ValidateImage(image); err != nil {
		return errs.Invalidf("invalid --image: %w", err)
	}
	return net.Validate()
}
