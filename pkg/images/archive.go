package images

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations `ctr images import` names an OCI archive's images by.
const (
	AnnotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// Archive is one OCI image-layout tar holding every image (each blob once, shared layers
// too), streamed from the cache; its size is known before it is written, so the ROOT bake can
// size the filesystem and stream it in without a temporary copy.
type Archive struct {
	cacheDir string
	index    []byte
	blobs    []v1.Descriptor
	Size     int64
}

// NewArchive plans the archive of imgs.
func NewArchive(cacheDir string, imgs []Image) (*Archive, error) {
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	a := &Archive{cacheDir: cacheDir}
	seen := map[v1.Hash]bool{}
	for _, im := range imgs {
		if len(im.Blobs) == 0 {
			return nil, fmt.Errorf("%s: nothing pulled", im.Name)
		}
		top := im.Blobs[0]
		ann := map[string]string{AnnotationImageName: im.Name}
		if r, err := ParseRef(im.Name); err == nil && r.Tag != "" {
			ann[annotationRefName] = r.Tag
		}
		idx.Manifests = append(idx.Manifests, v1.Descriptor{MediaType: top.MediaType, Digest: top.Digest, Size: top.Size, Annotations: ann})
		for _, b := range im.Blobs {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				a.blobs = append(a.blobs, b)
				a.Size += entrySize(b.Size)
			}
		}
	}
	var err error
	if a.index, err = json.Marshal(idx); err != nil {
		return nil, err
	}
	a.Size += entrySize(int64(len(ociLayout))) + entrySize(int64(len(a.index))) + 2*512
	return a, nil
}

const ociLayout = `{"imageLayoutVersion":"1.0.0"}`

// entrySize is a ustar entry: one header block and the content padded to 512.
func entrySize(n int64) int64 { return 512 + (n+511)/512*512 }

// WriteTo streams the archive: oci-layout and index.json first (inspect reads them without
// reading the blobs), then the blobs; each blob is checked to have its descriptor's size.
func (a *Archive) WriteTo(ctx context.Context, w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	mtime := time.Unix(0, 0)
	hdr := func(name string, size int64) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, ModTime: mtime, Format: tar.FormatUSTAR})
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(ociLayout)}, {"index.json", a.index}} {
		if err := hdr(f.name, int64(len(f.data))); err != nil {
			return cw.n, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return cw.n, err
		}
	}
	for _, b := range a.blobs {
		if err := ctx.Err(); err != nil {
			return cw.n, err
		}
		if err := hdr("blobs/"+b.Digest.Algorithm+"/"+b.Digest.Hex, b.Size); err != nil {
			return cw.n, err
		}
		f, err := os.Open(BlobPath(a.cacheDir, b.Digest))
		if err != nil {
			return cw.n, fmt.Errorf("image cache: %w", err)
		}
		n, err := io.Copy(tw, f)
		f.Close()
		if err != nil {
			return cw.n, err
		}
		if n != b.Size {
			return cw.n, fmt.Errorf("image cache: blob %s has %d bytes, its descriptor says %d", b.Digest, n, b.Size)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, err
	}
	if cw.n != a.Size {
		return cw.n, fmt.Errorf("image archive: wrote %d bytes, planned %d", cw.n, a.Size)
	}
	return cw.n, nil
}

// Reader returns the archive as a stream (for rootfs entries); the writing runs in a goroutine.
func (a *Archive) Reader(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		_, err := a.WriteTo(ctx, pw)
		pw.CloseWithError(err)
	}()
	return pr
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
