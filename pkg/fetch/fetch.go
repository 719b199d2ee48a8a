// Package fetch downloads Flatcar release images: it resolves versions through version.txt,
// verifies the clear-signed DIGESTS, and streams network -> SHA512 -> (bzip2 decode) -> output in
// one pass while keeping the verified download in a cache and an interrupted one resumable.
// The HTTP side (timeouts, retries, Range resume, the deadline) is httpx's.
package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// Compression choices for Options.Compression.
const (
	CompressionAuto = "auto" // the .img, or the .img.bz2 when the server has no .img (404)
)

// Options describe one fetch.
type Options struct {
	Release     release.Release // Version may be an alias; it is resolved first
	Image       string          // qemu, qemu_uefi, openstack
	Compression string          // auto, none, bz2
	OutputFile  string          // "" means flatcar-<channel>-<version>-<image>.img in the current directory
	CacheDir    string
	Keyring     *verify.Keyring
	// InsecureSkipVerify skips OpenPGP and SHA512 checks and the cache (an unverified file is
	// never cached). Never the default.
	InsecureSkipVerify bool
	Progress           progress.Func // nil: no progress and no notes
	Log                io.Writer     // notes; warnings go here even without Progress
	// FromCache is for a caller that only reads the image (build converts it to its work copy):
	// when the verified image is the cache's own file (the .img, not a .bz2), Result.File is
	// that file, and OutputFile is not written. The cache owns it: never modify it.
	FromCache bool
	Now       func() time.Time
}

// Result reports what a fetch produced.
type Result struct {
	Channel     string            `json:"channel"`
	Arch        string            `json:"arch"`
	Version     string            `json:"version"`
	Image       string            `json:"image"`
	File        string            `json:"file"`
	URL         string            `json:"url"`
	Compression string            `json:"compression"`
	SHA512      string            `json:"sha512,omitempty"` // of the downloaded artifact
	Bytes       int64             `json:"bytes"`            // written to File
	Cached      bool              `json:"cached"`           // served from the cache, no image download
	Verified    bool              `json:"verified"`
	Signature   *verify.Signature `json:"signature,omitempty"`
}

// digestError is a download whose SHA512 differs from the signed DIGESTS.
type digestError struct {
	URL, Want, Got string
}

func (e *digestError) Error() string {
	return fmt.Sprintf("SHA512 of %s does not match the signed DIGESTS (got %s..., want %s...): the download was altered or damaged",
		e.URL, e.Got[:16], e.Want[:16])
}

// Fetch resolves, downloads, verifies and (for .bz2) decompresses one image into its output file.
// On any failure the output path is left untouched and nothing unverified enters the cache.
func Fetch(ctx context.Context, c *httpx.Client, o Options) (*Result, error) {
	if err := release.ValidateImage(o.Image); err != nil {
		return nil, err
	}
	comps, err := compressions(o.Compression)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Log = cmp.Or(o.Log, io.Discard)
	if !o.InsecureSkipVerify && o.Keyring == nil {
		return nil, errors.New("no keyring to verify with")
	}
	if o.CacheDir == "" && !o.InsecureSkipVerify {
		if o.CacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	if o.InsecureSkipVerify {
		fmt.Fprintln(o.Log, "WARNING: --insecure-skip-verify: the image is NOT verified (no OpenPGP signature, no SHA512 check)"+
			" and not cached; whoever controls the server or the network path decides what you boot.")
	}
	rel, err := Resolve(ctx, c, o.Release)
	if err != nil {
		return nil, err
	}
	o.OutputFile = cmp.Or(o.OutputFile, fmt.Sprintf("flatcar-%s-%s-%s.img", rel.Channel, rel.Version, o.Image))
	if err := atomicfile.CheckPath(o.OutputFile); err != nil { // before the download
		return nil, err
	}
	out, err := atomicfile.Create(o.OutputFile)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	f := &fetcher{c: c, o: o, rel: rel, out: out}
	if !o.InsecureSkipVerify {
		comps = f.preferCached(comps)
	}
	var missing []string
	for _, comp := range comps {
		res, err := f.artifact(ctx, comp)
		if httpx.IsNotFound(err) {
			var se *httpx.StatusError
			errors.As(err, &se)
			missing = append(missing, se.URL)
			continue
		}
		if err != nil {
			if !errors.As(err, new(*interrupt.Error)) {
				err = interrupt.Nothing(err, o.OutputFile+" was not written (its temporary file was removed)")
			}
			return nil, err
		}
		if res.File != o.OutputFile {
			return res, nil // the cache's own file (FromCache): the output stays unwritten
		}
		if err := out.Commit(0o644); err != nil {
			return nil, err
		}
		return res, nil
	}
	return nil, fmt.Errorf("release %s (%s, %s) has no %s image: the server answered 404 for %s",
		rel.Version, rel.Channel, rel.Arch, o.Image, strings.Join(missing, " and "))
}

// Validate checks the caller's choices before any request; its errors wrap errs.ErrInvalid.
func (o Options) Validate() error {
	if _, err := compressions(o.Compression); err != nil {
		return errs.Invalidf("invalid --compression %q: must be auto, none or bz2", o.Compression)
	}
	return nil
}

func compressions(c string) ([]string, error) {
	switch c {
	case "", CompressionAuto:
		return []string{release.CompressionNone, release.CompressionBzip2}, nil
	case release.CompressionNone, release.CompressionBzip2:
		return []string{c}, nil
	}
	return nil, fmt.Errorf("unknown compression %q; valid: auto, none, bz2", c)
}

type fetcher struct {
	c   *httpx.Client
	o   Options
	rel release.Release
	out *atomicfile.File
}

// output is where the verified bytes of compression comp go: the output file, or nowhere when
// the caller reads the cache's file itself (Options.FromCache).
func (f *fetcher) output(comp string) io.Writer {
	if f.inCache(comp) {
		return io.Discard
	}
	return pathWriter{f.out, f.o.OutputFile}
}

func (f *fetcher) inCache(comp string) bool { return f.o.FromCache && comp == release.CompressionNone }

func (f *fetcher) logf(format string, a ...any) {
	if f.o.Progress != nil {
		fmt.Fprintf(f.o.Log, format+"\n", a...)
	}
}

// preferCached moves the compressions already in the cache to the front, so a cached .bz2 is
// used before the server is asked about the .img.
func (f *fetcher) preferCached(comps []string) []string {
	var hit, miss []string
	for _, comp := range comps {
		if newCacheEntry(f.o.CacheDir, f.rel, release.ImageFile(f.o.Image, comp)).hit() {
			hit = append(hit, comp)
		} else {
			miss = append(miss, comp)
		}
	}
	return append(hit, miss...)
}

func (f *fetcher) result(comp, file string) *Result {
	return &Result{Channel: f.rel.Channel, Arch: f.rel.Arch, Version: f.rel.Version, Image: f.o.Image,
		File: f.o.OutputFile, URL: f.rel.URL(file), Compression: comp}
}

// artifact produces the output from one compression of the image: from the cache when a
// verified copy is there, else from the server.
func (f *fetcher) artifact(ctx context.Context, comp string) (*Result, error) {
	file := release.ImageFile(f.o.Image, comp)
	if f.o.InsecureSkipVerify {
		return f.insecure(ctx, comp, file)
	}
	entry, err := openCache(f.o.CacheDir, f.rel, file)
	if err != nil {
		return nil, err
	}
	defer entry.Close()
	// Read a verified entry under a shared lock (other runs read it too); anything that writes
	// the entry takes the exclusive lock and looks again, since the run it waited for may have
	// stored the file meanwhile.
	wait := f.c.Options().DownloadTimeout
	if err := entry.lock(ctx, filelock.Shared, wait, f.o.Log); err != nil {
		return nil, err
	}
	for exclusive := false; ; exclusive = true {
		if entry.hit() {
			res, err := f.fromCache(ctx, entry, comp, file)
			if err == nil {
				return res, nil
			}
			// Ctrl-C while the cached file was read says nothing about the file: keep it.
			if errors.As(err, new(*writeError)) || ctx.Err() != nil {
				return nil, err
			}
			if err := f.restartOutput(); err != nil {
				return nil, err
			}
			if exclusive {
				f.logf("cached %s is no longer valid (%v); downloading it again", entry.File, err)
				entry.discard()
			}
		}
		if exclusive {
			return f.download(ctx, entry, comp, file)
		}
		// Drop the shared lock first: two runs that both hold it and both want to write must
		// not wait for each other.
		entry.unlock()
		if err := entry.lock(ctx, filelock.Exclusive, wait, f.o.Log); err != nil {
			return nil, err
		}
	}
}

// verifiedDigest checks the clear-signed DIGESTS and returns the SHA512 it lists for file.
func (f *fetcher) verifiedDigest(signed []byte, url, file string) (string, *verify.Signature, error) {
	text, sig, err := verify.Clearsigned(signed, f.o.Keyring, f.o.Now())
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", url, err)
	}
	d, err := release.ParseDigests(text)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", url, err)
	}
	sum, err := d.SHA512(file)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", url, err)
	}
	return sum, sig, nil
}

func (f *fetcher) fromCache(ctx context.Context, entry *cacheEntry, comp, file string) (*Result, error) {
	signed, err := os.ReadFile(entry.Digests)
	if err != nil {
		return nil, err
	}
	want, sig, err := f.verifiedDigest(signed, entry.Digests, file)
	if err != nil {
		return nil, err
	}
	in, err := os.Open(entry.File)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return nil, err
	}
	f.logf("Using cached %s", entry.File)
	bar := f.o.Progress.Start("cached "+file, fi.Size())
	got, n, err := stream(ctx, io.TeeReader(in, bar), comp == release.CompressionBzip2, f.output(comp))
	bar.Finish()
	if err != nil {
		return nil, decodeContext(err, entry.File)
	}
	if got != want {
		return nil, &digestError{URL: entry.File, Want: want, Got: got}
	}
	res := f.result(comp, file)
	res.SHA512, res.Bytes, res.Cached, res.Verified, res.Signature = got, n, true, true, sig
	if f.inCache(comp) {
		res.File = entry.File
	}
	return res, nil
}

// download streams the artifact from the server (after the bytes a previous run kept) into the
// output and the cache. A resumed download that fails its digest is retried once from byte 0,
// since the kept bytes may be what is wrong.
func (f *fetcher) download(ctx context.Context, entry *cacheEntry, comp, file string) (*Result, error) {
	art := f.rel.Artifact(file)
	signed, err := f.c.GetSmall(ctx, art.SignedDigests, 1<<20)
	if httpx.IsNotFound(err) {
		// No signature: either there is no such image (the caller tries the next compression)
		// or it is published unsigned, which is refused.
		if perr := f.c.Probe(ctx, art.URL); perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("%s is published without its signed digests (%v); refusing an unverifiable image", art.URL, err)
	}
	if err != nil {
		return nil, err
	}
	want, sig, err := f.verifiedDigest(signed, art.SignedDigests, file)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		kept := entry.partialSize()
		got, n, err := f.downloadOnce(ctx, entry, art.URL, file, comp, kept)
		var de *decodeError
		if errors.As(err, &de) && got == want {
			os.Remove(entry.Partial) // verified but undecodable: the published file itself is bad
			de.File = art.URL
			return nil, fmt.Errorf("%w; it matches its signed digest, so the file on the server is damaged", de)
		}
		if err != nil && got == "" {
			var we *writeError
			if errors.Is(err, syscall.ENOSPC) && errors.As(err, &we) && we.Path == entry.Partial {
				// The partial download filled the cache's disk: keeping it for a resume would keep it full.
				os.Remove(entry.Partial)
				return nil, fmt.Errorf("%w (the partial download was removed; free space or choose another --cache-dir)", err)
			}
			if kept := entry.partialSize(); interrupt.IsCancel(err) && kept > 0 {
				return nil, interrupt.Left(err, fmt.Sprintf("%s: the %d bytes received so far, kept so that the same command resumes the download (the output file was not written)", entry.Partial, kept))
			}
			return nil, err
		}
		if got != want {
			os.Remove(entry.Partial)
			if kept > 0 && attempt == 0 {
				f.logf("the download resumed from byte %d does not match its digest; downloading it again from the start", kept)
				if err := f.restartOutput(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, &digestError{URL: art.URL, Want: want, Got: got}
		}
		if err := entry.store(signed); err != nil {
			return nil, err
		}
		res := f.result(comp, file)
		res.SHA512, res.Bytes, res.Verified, res.Signature = got, n, true, sig
		if f.inCache(comp) {
			res.File = entry.File
		}
		return res, nil
	}
}

// downloadOnce runs one pass: kept bytes of .partial, then the network from that offset, each
// network byte appended to .partial, everything through the hash (and decoder) into the output.
func (f *fetcher) downloadOnce(ctx context.Context, entry *cacheEntry, url, file, comp string, kept int64) (string, int64, error) {
	body, err := f.c.Open(ctx, url, kept)
	if err != nil {
		return "", 0, err
	}
	defer body.Close()
	partial, err := os.OpenFile(entry.Partial, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("cannot write the download cache (choose another with --cache-dir): %w", err)
	}
	defer partial.Close()
	if _, err := partial.Seek(kept, io.SeekStart); err != nil {
		return "", 0, err
	}
	if kept > 0 {
		f.logf("Resuming %s from byte %d (kept in %s)", url, kept, entry.Partial)
	} else {
		f.logf("Downloading %s", url)
	}
	total := int64(-1)
	if body.Total >= 0 {
		total = body.Total
	}
	bar := f.o.Progress.Start(file, total)
	src := io.MultiReader(io.NewSectionReader(partial, 0, kept), io.TeeReader(body, pathWriter{partial, entry.Partial}))
	got, n, err := stream(ctx, io.TeeReader(src, bar), comp == release.CompressionBzip2, f.output(comp))
	bar.Finish()
	if err != nil && got == "" {
		if errors.As(err, new(*httpx.DroppedError)) || errors.As(err, new(*httpx.DeadlineError)) {
			err = fmt.Errorf("%w; the %d bytes received are kept in %s: run the same command again to resume", err, body.Offset, entry.Partial)
		}
		return "", n, err
	}
	if serr := partial.Sync(); serr != nil && err == nil {
		return "", n, serr
	}
	return got, n, err
}

func (f *fetcher) insecure(ctx context.Context, comp, file string) (*Result, error) {
	url := f.rel.URL(file)
	body, err := f.c.Open(ctx, url, 0)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	f.logf("Downloading %s", url)
	bar := f.o.Progress.Start(file, body.Total)
	got, n, err := stream(ctx, io.TeeReader(body, bar), comp == release.CompressionBzip2, pathWriter{f.out, f.o.OutputFile})
	bar.Finish()
	if err != nil {
		return nil, decodeContext(err, url)
	}
	res := f.result(comp, file)
	res.SHA512, res.Bytes = got, n
	return res, nil
}

func decodeContext(err error, name string) error {
	var de *decodeError
	if errors.As(err, &de) {
		de.File = name
	}
	return err
}

// restartOutput empties the output temp file before a second pass.
func (f *fetcher) restartOutput() error {
	if err := f.out.Truncate(0); err != nil {
		return err
	}
	_, err := f.out.Seek(0, io.SeekStart)
	return err
}
