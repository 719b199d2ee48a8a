package images

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is one pulled image, every blob of it verified in the cache.
type Image struct {
	Name           string `json:"name"`           // containerd's name (what kubeadm asks for)
	Ref            string `json:"ref"`            // as given
	Digest         string `json:"digest"`         // what the name points to: the index or the manifest
	MediaType      string `json:"mediaType"`      // of Digest
	ManifestDigest string `json:"manifestDigest"` // the platform's manifest (= Digest without an index)
	Platform       string `json:"platform"`       // linux/amd64
	Size           int64  `json:"size"`           // bytes of its blobs (manifests, config, layers)
	From           string `json:"from"`           // registry host contacted (the mirror when there is one)

	Blobs []v1.Descriptor `json:"-"` // top-level, platform manifest, config, layers
	src   source          // where it resolved: its blobs come from there too
}

// Result is a Pull's outcome.
type Result struct {
	Images      []Image `json:"images"`
	Transferred int64   `json:"transferredBytes"` // blob and manifest bytes fetched (0 on a warm cache)
	Fetched     int     `json:"fetchedBlobs"`
	Cached      int     `json:"cachedBlobs"`
}

// Size is the bytes of the unique blobs (what the archive holds, less tar headers).
func (r *Result) Size() int64 {
	seen := map[v1.Hash]bool{}
	var n int64
	for _, im := range r.Images {
		for _, b := range im.Blobs {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				n += b.Size
			}
		}
	}
	return n
}

// Pull fetches refs for linux/o.Arch into the cache: manifests by digest, every blob verified
// against its descriptor (sha256 and size) before it is renamed into the cache.
func Pull(ctx context.Context, refs []Ref, o Options) (*Result, error) {
	o.Arch = cmp.Or(o.Arch, "amd64")
	if o.Jobs <= 0 {
		o.Jobs = 4
	}
	o.Log = cmp.Or(o.Log, io.Discard)
	tr, err := o.transport()
	if err != nil {
		return nil, err
	}
	c := &cache{dir: filepath.Join(o.CacheDir, "images")}
	puller, err := remote.NewPuller(remote.WithTransport(tr), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("flatcar-capo"), remote.WithJobs(o.Jobs))
	if err != nil {
		return nil, err
	}
	p := &pull{ctx: ctx, o: o, c: c, puller: puller}
	hosts := make([]string, 0, len(refs))
	for _, r := range refs {
		for _, src := range p.sources(r) {
			hosts = append(hosts, src.host)
		}
	}
	registerLogins(hosts)

	res := &Result{Images: make([]Image, len(refs))}
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, r := range refs {
		wg.Go(func() {
			res.Images[i], errs[i] = p.resolve(r)
		})
	}
	wg.Wait()
	if err := cmp.Or(ctx.Err(), joinResolveErrors(errs)); err != nil {
		return nil, err
	}
	// The layers of every image, each once, in parallel.
	type job struct {
		d   v1.Descriptor
		src source
		ref string
	}
	var jobs []job
	seen := map[v1.Hash]bool{}
	for i, im := range res.Images {
		for _, b := range im.Blobs {
			if seen[b.Digest] {
				continue
			}
			seen[b.Digest] = true
			if c.has(b) {
				res.Cached++
				continue
			}
			jobs = append(jobs, job{b, im.src, refs[i].Given})
		}
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].d.Size > jobs[b].d.Size }) // big first: less tail
	var mu sync.Mutex
	var failed []error
	slots := make(chan struct{}, o.Jobs) // at most o.Jobs blobs at once
	for _, j := range jobs {
		mu.Lock()
		stop := len(failed) > 0
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := p.blob(j.src, j.ref, j.d)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			res.Transferred += j.d.Size
			res.Fetched++
		})
	}
	wg.Wait()
	if err := cmp.Or(ctx.Err(), errors.Join(failed...)); err != nil {
		return nil, err
	}
	res.Transferred += p.manifestBytes.Load()
	for _, im := range res.Images {
		fmt.Fprintf(o.Log, "%s: %s %s, %.1f MiB\n", im.Name, shortDigest(im.Digest), im.Platform, float64(im.Size)/(1<<20))
	}
	return res, nil
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

type pull struct {
	ctx    context.Context
	o      Options
	c      *cache
	puller *remote.Puller

	manifestBytes atomic.Int64 // resolved in parallel
}

// source is the repository actually contacted for a ref: its mirror's when it has one.
type source struct {
	repo name.Repository
	host string
}

// sources are the repositories to try for a ref, in order: its mirrors (a path-prefixed one
// under its prefix, as containerd's override_path asks it), else the registry itself.
func (p *pull) sources(r Ref) []source {
	var out []source
	for _, m := range p.o.Mirrors.For(r.Registry()) {
		var opts []name.Option
		if m.Insecure {
			opts = append(opts, name.Insecure)
		}
		repo, err := name.NewRepository(path.Join(m.Host, m.Prefix, r.Repo.RepositoryStr()), opts...)
		if err != nil { // the host and prefix were checked by ParseMirror, the path by ParseRef
			continue
		}
		out = append(out, source{repo: repo, host: m.Host})
	}
	if len(out) == 0 {
		out = append(out, source{repo: r.Repo, host: r.Repo.RegistryStr()})
	}
	return out
}

// resolve tries the ref's sources in order (the next when one fails, as containerd does) and
// keeps the first that resolves it.
func (p *pull) resolve(r Ref) (Image, error) {
	var failed []error
	for _, src := range p.sources(r) {
		im, err := p.resolveFrom(r, src)
		if err == nil || errors.Is(err, errNotCached) || p.ctx.Err() != nil {
			return im, err
		}
		failed = append(failed, err)
	}
	if len(failed) > 1 {
		return Image{}, fmt.Errorf("%s: every mirror failed: %w", r.Given, errors.Join(failed...))
	}
	return Image{}, failed[0]
}

var (
	indexTypes    = map[types.MediaType]bool{types.OCIImageIndex: true, types.DockerManifestList: true}
	manifestTypes = map[types.MediaType]bool{types.OCIManifestSchema1: true, types.DockerManifestSchema2: true}
)

// resolveFrom finds the ref's digest (its pin, or a HEAD of the tag), then the platform's manifest
// and its config, each from the cache when it holds that digest.
func (p *pull) resolveFrom(r Ref, src source) (Image, error) {
	im := Image{Name: r.Name, Ref: r.Given, Platform: "linux/" + p.o.Arch, From: src.host, src: src}
	var top v1.Descriptor
	switch {
	case r.Digest != "":
		h, _ := v1.NewHash(r.Digest)
		top = v1.Descriptor{Digest: h, Size: -1}
	case p.puller == nil: // offline (a dry run): the digest the tag had at the last pull
		h, err := p.c.tag(r.Name, p.o.Arch)
		if err != nil {
			return im, errNotCached
		}
		top = v1.Descriptor{Digest: h, Size: -1}
	default:
		d, err := p.puller.Head(p.ctx, src.repo.Tag(r.Tag))
		if err != nil {
			return im, explain(r, src, err)
		}
		top = *d
		p.c.putTag(r.Name, p.o.Arch, d.Digest)
	}
	raw, mt, err := p.manifest(r, src, top)
	if err != nil {
		return im, err
	}
	top.MediaType, top.Size = mt, int64(len(raw))
	im.Digest, im.MediaType = top.Digest.String(), string(mt)
	im.Blobs = append(im.Blobs, top)
	man := top
	if indexTypes[mt] {
		var idx v1.IndexManifest
		if err := json.Unmarshal(raw, &idx); err != nil {
			return im, fmt.Errorf("%s: the index %s is not valid JSON: %v", r.Given, top.Digest, err)
		}
		child, ok := pickPlatform(idx.Manifests, p.o.Arch)
		if !ok {
			return im, fmt.Errorf("%s has no linux/%s image: its index (%s) has %s; use a ref that has one, or build for an arch it has",
				r.Given, p.o.Arch, shortDigest(top.Digest.String()), capList(platforms(idx.Manifests), 10))
		}
		if raw, mt, err = p.manifest(r, src, child); err != nil {
			return im, err
		}
		man = child
		man.MediaType, man.Size = mt, int64(len(raw))
		im.Blobs = append(im.Blobs, man)
	}
	if !manifestTypes[mt] {
		return im, fmt.Errorf("%s: unsupported manifest type %q (want an OCI or Docker schema 2 image)", r.Given, mt)
	}
	im.ManifestDigest = man.Digest.String()
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return im, fmt.Errorf("%s: the manifest %s is not valid JSON: %v", r.Given, man.Digest, err)
	}
	// The config is small and says the platform of a single-platform image: fetch it now.
	if !p.c.has(m.Config) {
		if p.puller == nil {
			return im, errNotCached
		}
		if err := p.blob(src, r.Given, m.Config); err != nil {
			return im, err
		}
		p.manifestBytes.Add(m.Config.Size)
	}
	cfg, err := p.c.read(m.Config.Digest)
	if err != nil {
		return im, err
	}
	var cf struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	}
	json.Unmarshal(cfg, &cf)
	if cf.Architecture != "" && (cf.Architecture != p.o.Arch || (cf.OS != "" && cf.OS != "linux")) {
		return im, fmt.Errorf("%s has no linux/%s image: it is a single-platform %s/%s image; use a multi-arch ref or one built for linux/%s",
			r.Given, p.o.Arch, cf.OS, cf.Architecture, p.o.Arch)
	}
	im.Blobs = append(append(im.Blobs, m.Config), m.Layers...)
	for _, b := range im.Blobs {
		im.Size += b.Size
	}
	return im, nil
}

// manifest returns the manifest d names, from the cache or the registry, verified by digest.
func (p *pull) manifest(r Ref, src source, d v1.Descriptor) ([]byte, types.MediaType, error) {
	if raw, err := p.c.read(d.Digest); err == nil {
		return raw, mediaType(raw, d.MediaType), nil
	}
	if p.puller == nil {
		return nil, "", errNotCached
	}
	if d.Size > MaxManifestSize { // known from the HEAD or the index: refused before any byte
		return nil, "", fmt.Errorf("%s: %s says its manifest %s is %s bytes, more than a manifest or index can be (%d MiB, the limit of distribution and containerd): refused",
			r.Given, src.host, shortDigest(d.Digest.String()), thousands(int(d.Size)), MaxManifestSize>>20)
	}
	desc, err := p.puller.Get(p.ctx, src.repo.Digest(d.Digest.String()))
	if err != nil {
		return nil, "", explain(r, src, err)
	}
	raw := desc.Manifest
	if len(raw) > MaxManifestSize {
		return nil, "", fmt.Errorf("%s: %s served a manifest of %s bytes, more than a manifest or index can be (%d MiB, the limit of distribution and containerd): refused",
			r.Given, src.host, thousands(len(raw)), MaxManifestSize>>20)
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest.String() {
		return nil, "", fmt.Errorf("%s: %s served a manifest whose digest is %s, not %s: refused (a damaged or altered registry)", r.Given, src.host, got, d.Digest)
	}
	if err := p.c.put(d.Digest, bytes.NewReader(raw), int64(len(raw))); err != nil {
		return nil, "", err
	}
	p.manifestBytes.Add(int64(len(raw)))
	return raw, mediaType(raw, desc.MediaType), nil
}

// MaxManifestSize bounds a manifest or an index: distribution refuses to store a larger one
// and containerd to read it. A 300,000-entry index (60 MB) took 17 s and 567 MB before.
const MaxManifestSize = 4 << 20

// mediaType is the manifest's own mediaType field, else the one the registry said.
func mediaType(raw []byte, said types.MediaType) types.MediaType {
	var m struct {
		MediaType types.MediaType `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"` // only whether it is there: not decoded
	}
	if json.Unmarshal(raw, &m) == nil {
		if m.MediaType != "" {
			return m.MediaType
		}
		if m.Manifests != nil {
			return types.OCIImageIndex
		}
	}
	return cmp.Or(said, types.OCIManifestSchema1)
}

// blob fetches one blob into the cache, checked against d's digest and size on the way.
func (p *pull) blob(src source, ref string, d v1.Descriptor) error {
	l, err := p.puller.Layer(p.ctx, src.repo.Digest(d.Digest.String()))
	if err != nil {
		return fmt.Errorf("%s: blob %s: %w", ref, shortDigest(d.Digest.String()), err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("%s: blob %s from %s: %w", ref, shortDigest(d.Digest.String()), src.host, err)
	}
	defer rc.Close()
	if err := p.c.put(d.Digest, rc, d.Size); err != nil {
		if errors.As(err, new(*digestError)) || strings.Contains(err.Error(), "checksum") {
			return fmt.Errorf("%s: %s served blob %s with the wrong content: refused (%v); the registry's storage is damaged or something between rewrites it", ref, src.host, d.Digest, err)
		}
		return fmt.Errorf("%s: blob %s from %s: %w", ref, shortDigest(d.Digest.String()), src.host, err)
	}
	return nil
}

// pickPlatform returns the index entry for linux/arch (arm64: any variant, v8 preferred).
func pickPlatform(ms []v1.Descriptor, arch string) (found v1.Descriptor, ok bool) {
	for _, m := range ms {
		if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != arch {
			continue
		}
		if !ok || m.Platform.Variant == "" || m.Platform.Variant == "v8" {
			found, ok = m, true
		}
	}
	return found, ok
}

// platforms lists the index's platforms, each once, in their order.
func platforms(ms []v1.Descriptor) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range ms {
		s := "(no platform)"
		if m.Platform != nil {
			s = m.Platform.OS + "/" + m.Platform.Architecture
			if m.Platform.Variant != "" {
				s += "/" + m.Platform.Variant
			}
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return []string{"no images"}
	}
	return out
}

// capList joins at most max items, then says how many more there are ("... and 299,990 more"):
// an error message stays one short line whatever a registry sends.
func capList(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:max], ", ") + ", ... and " + thousands(len(items)-max) + " more"
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// cache is blobs by digest: <dir>/blobs/sha256/<hex>, each renamed into place once verified.
type cache struct{ dir string }

func (c *cache) path(h v1.Hash) string { return filepath.Join(c.dir, "blobs", h.Algorithm, h.Hex) }

func (c *cache) has(d v1.Descriptor) bool {
	st, err := os.Stat(c.path(d.Digest))
	return err == nil && st.Mode().IsRegular() && (d.Size < 0 || st.Size() == d.Size)
}

// read returns a small cached blob (manifests, configs), re-checking its digest.
func (c *cache) read(h v1.Hash) ([]byte, error) {
	raw, err := os.ReadFile(c.path(h))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != h.Hex {
		os.Remove(c.path(h))
		return nil, os.ErrNotExist
	}
	return raw, nil
}

type digestError struct{ want, got string }

func (e *digestError) Error() string { return fmt.Sprintf("got sha256:%s, want %s", e.got, e.want) }

// put stores r as blob h, refusing content whose sha256 or size differs.
func (c *cache) put(h v1.Hash, r io.Reader, size int64) error {
	dir := filepath.Dir(c.path(h))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-"+h.Hex[:12]+"-*")
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), r)
	if err != nil {
		if strings.Contains(err.Error(), "checksum") {
			return err
		}
		return fmt.Errorf("writing %s into the image cache %s: %w", shortDigest(h.String()), c.dir, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return &digestError{want: h.String(), got: got}
	}
	if size >= 0 && n != size {
		return &digestError{want: fmt.Sprintf("%s of %d bytes", h, size), got: fmt.Sprintf("%s… of %d bytes", h.Hex[:12], n)}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s into the image cache %s: %w", shortDigest(h.String()), c.dir, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), c.path(h))
}

// BlobPath is where the cache keeps blob d (for the archive writer).
func BlobPath(cacheDir string, d v1.Hash) string {
	return (&cache{dir: filepath.Join(cacheDir, "images")}).path(d)
}

var errNotCached = errors.New("not in the image cache")

// tagPath records which digest a tag had for an arch at the last pull (for dry runs).
func (c *cache) tagPath(name, arch string) string {
	s := sha256.Sum256([]byte(name + " " + arch))
	return filepath.Join(c.dir, "tags", hex.EncodeToString(s[:]))
}

func (c *cache) putTag(name, arch string, h v1.Hash) {
	p := c.tagPath(name, arch)
	if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
		tmp := p + ".tmp"
		if os.WriteFile(tmp, []byte(h.String()+"\n"), 0o644) == nil {
			os.Rename(tmp, p)
		}
	}
}

func (c *cache) tag(name, arch string) (v1.Hash, error) {
	b, err := os.ReadFile(c.tagPath(name, arch))
	if err != nil {
		return v1.Hash{}, err
	}
	return v1.NewHash(strings.TrimSpace(string(b)))
}

// Cached resolves refs from the cache alone, no network (a dry run): each image as the last
// pull saw it, or nil for a ref the cache cannot resolve.
func Cached(refs []Ref, o Options) []*Image {
	o.Arch = cmp.Or(o.Arch, "amd64")
	p := &pull{ctx: context.Background(), o: o, c: &cache{dir: filepath.Join(o.CacheDir, "images")}}
	out := make([]*Image, len(refs))
	for i, r := range refs {
		if im, err := p.resolve(r); err == nil {
			out[i] = &im
		}
	}
	return out
}
