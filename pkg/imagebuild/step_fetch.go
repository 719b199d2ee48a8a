package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// stepFetch gets the base image exactly as `flatcar-capo fetch` does (verified, cached; the
// cache is never modified), or takes --base-image as it is. A verified .img in the cache is
// used where it is (the work copy is converted straight from it); only a .bz2 is decompressed
// into the build directory.
type stepFetch struct{ noCleanup }

func (*stepFetch) Name() string { return "fetch" }

func (*stepFetch) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	if o.BaseImage != "" {
		abs, err := filepath.Abs(o.BaseImage)
		if err != nil {
			return halt(state, err)
		}
		if fi, err := os.Stat(abs); err != nil {
			return halt(state, fmt.Errorf("--base-image %s: not a readable image file (%v)", o.BaseImage, err))
		} else if !fi.Mode().IsRegular() {
			return halt(state, errs.Invalidf("--base-image %s is %s, not an image file", o.BaseImage, infile.Describe(fi.Mode())))
		}
		rec.Base = record.BaseImage{File: filepath.Base(abs)} // the file's name: no build-host path goes into the record or SBOM
		keyBase.put(state, abs)
		note(state, "local base image %s (not verified: your file)", abs)
		return multistep.ActionContinue
	}
	out := filepath.Join(keyWorkDir.get(state), "base.img")
	res, err := fetch.Fetch(ctx, o.client(), fetch.Options{Release: keyRelease.get(state), Image: o.Base, Compression: fetch.CompressionAuto,
		OutputFile: out, CacheDir: o.CacheDir, Keyring: o.Keyring, InsecureSkipVerify: o.InsecureSkipVerify,
		Progress: progress.To(o.Log, progress.Lines), Log: o.Log, FromCache: true})
	if err != nil {
		return halt(state, err)
	}
	rec.Base = record.BaseImage{File: filepath.Base(res.File), URL: redact.URL(res.URL), SHA512: res.SHA512, Verified: res.Verified, Cached: res.Cached}
	keyBase.put(state, res.File) // the cache's path, where this build reads it; the record names the file only
	how := "downloaded"
	if res.Cached {
		how = "from the cache"
	}
	verified := "verified (OpenPGP + SHA512)"
	if !res.Verified {
		verified = "NOT verified (--insecure-skip-verify)"
	}
	note(state, "%s image %s, %s, %s", o.Base, redact.URL(res.URL), how, verified)
	if res.Verified {
		if err := fetchFlatcarSBOM(ctx, state, res); err != nil {
			return halt(state, err)
		}
	}
	return multistep.ActionContinue
}

// fetchFlatcarSBOM records Flatcar's package SBOM of the release, checked like the image, for
// the build's SBOM to refer to. Not for an unverified base: an SBOM says what a verified
// release holds.
func fetchFlatcarSBOM(ctx context.Context, state multistep.StateBag, res *fetch.Result) error {
	o, rec := options(state), buildRecord(state)
	rel := keyRelease.get(state)
	rel.Channel, rel.Arch, rel.Version = res.Channel, res.Arch, res.Version // resolved
	s, err := fetch.FetchSBOM(ctx, o.client(), rel, o.Keyring, nil)
	var unsigned *fetch.UnsignedSBOMError
	if errors.As(err, &unsigned) {
		note(state, "warning: Flatcar's SBOM of release %s: %v", res.Version, redact.String(unsigned.Error()))
		return nil
	}
	if err != nil {
		return fmt.Errorf("Flatcar's SBOM of release %s: %w", res.Version, err)
	}
	if s == nil {
		note(state, "release %s publishes no %s: the SBOM lists the release without it", res.Version, release.SBOMFile)
		return nil
	}
	rec.Base.SBOM = &record.FlatcarSBOM{URL: redact.URL(s.URL), SHA512: s.SHA512, Verified: s.Verified}
	note(state, "Flatcar's SBOM %s, verified (OpenPGP + SHA512)", redact.URL(s.URL))
	return nil
}
