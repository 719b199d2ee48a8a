package fetch

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// maxSBOM bounds the download of Flatcar's SBOM (a few MB of SPDX JSON in practice).
const maxSBOM = 256 << 20

// SBOM is Flatcar's own package SBOM of a release, checked like the image: its SHA512 against
// the release's clear-signed DIGESTS for it.
type SBOM struct {
	File     string
	URL      string
	SHA512   string
	Verified bool
}

// FetchSBOM downloads release.SBOMFile of the resolved release rel and verifies it with keyring.
// A release that publishes none gives (nil, nil): older releases have no SBOM. A published SBOM
// without its signed DIGESTS is an *UnsignedSBOMError (the build goes on without referring to
// it: an SBOM is a record, not what the node runs); one whose digest differs is an error, as for
// the image.
func FetchSBOM(ctx context.Context, c *httpx.Client, rel release.Release, keyring *verify.Keyring, now func() time.Time) (*SBOM, error) {
	art := rel.Artifact(release.SBOMFile)
	signed, err := c.GetSmall(ctx, art.SignedDigests, 1<<20)
	if httpx.IsNotFound(err) {
		if perr := c.Probe(ctx, art.URL); httpx.IsNotFound(perr) {
			return nil, nil
		} else if perr != nil {
			return nil, perr
		}
		return nil, &UnsignedSBOMError{URL: art.URL, Err: err}
	}
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	f := &fetcher{o: Options{Keyring: keyring, Now: now}}
	want, _, err := f.verifiedDigest(signed, art.SignedDigests, release.SBOMFile)
	if err != nil {
		return nil, err
	}
	data, err := c.GetSmall(ctx, art.URL, maxSBOM)
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, &digestError{URL: art.URL, Want: want, Got: got}
	}
	return &SBOM{File: release.SBOMFile, URL: art.URL, SHA512: want, Verified: true}, nil
}

// UnsignedSBOMError says a release publishes its SBOM without the signed DIGESTS that would
// verify it: nothing unverified goes into an SBOM of ours.
type UnsignedSBOMError struct {
	URL string
	Err error
}

func (e *UnsignedSBOMError) Error() string {
	return fmt.Sprintf("%s is published without its signed digests (%v): not referred to, since it cannot be verified", e.URL, e.Err)
}

func (e *UnsignedSBOMError) Unwrap() error { return e.Err }
