package fetchtest

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha512"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	dsbzip2 "github.com/dsnet/compress/bzip2"
)

// Release describes one published release.
type Release struct {
	Channel, Arch, Version, Image string
	Content                       []byte          // the .img as published
	Signer                        *openpgp.Subkey // signs the DIGESTS
	Key                           *Key            // makes the .sig
	SignedAt                      time.Time
	Current                       bool // also the channel's "current"
	WithoutImg                    bool // publish only the .bz2, like releases before 3602.2.0
	WithoutBZ2                    bool // publish only the .img (big images: spares compressing them)
	// SBOM, when set, is published as Flatcar's package SBOM of the release
	// (flatcar_production_image_sbom.json), signed like the images.
	SBOM []byte
}

// Dir is the URL path of the release directory.
func (r Release) Dir() string { return fmt.Sprintf("/%s/%s-usr/%s/", r.Channel, r.Arch, r.Version) }

// SBOMPath is the URL path of Flatcar's package SBOM of the release.
func (r Release) SBOMPath() string { return r.Dir() + "flatcar_production_image_sbom.json" }

// ImgPath and BZ2Path are the URL paths of the two downloads.
func (r Release) ImgPath() string { return r.Dir() + "flatcar_production_" + r.Image + "_image.img" }
func (r Release) BZ2Path() string { return r.ImgPath() + ".bz2" }

// Publish puts the release on the server: version.txt (also under current/ when Current), the
// .img and .img.bz2 (multi-block bzip2 made in Go) and the SBOM when given, each with DIGESTS,
// DIGESTS.asc and .sig.
func (s *Server) Publish(t testing.TB, r Release) {
	t.Helper()
	vt := []byte(fmt.Sprintf("FLATCAR_VERSION=%s\nFLATCAR_VERSION_ID=%s\nFLATCAR_BUILD=%s\nFLATCAR_SDK_VERSION=%s\n",
		r.Version, r.Version, r.Version[:len(r.Version)-2], r.Version))
	s.Put(r.Dir()+"version.txt", vt)
	if r.Current {
		s.Put(fmt.Sprintf("/%s/%s-usr/current/version.txt", r.Channel, r.Arch), vt)
	}
	if !r.WithoutBZ2 {
		s.PublishFile(t, r, r.BZ2Path(), Bzip2(t, r.Content))
	}
	if !r.WithoutImg {
		s.PublishFile(t, r, r.ImgPath(), r.Content)
	}
	if r.SBOM != nil {
		s.PublishFile(t, r, r.SBOMPath(), r.SBOM)
	}
}

// PublishFile puts one artifact and its signed companions on the server.
func (s *Server) PublishFile(t testing.TB, r Release, path string, data []byte) {
	t.Helper()
	name := path[len(r.Dir()):]
	digests := Digests(name, data)
	s.Put(path, data)
	s.Put(path+".DIGESTS", digests)
	s.Put(path+".DIGESTS.asc", ClearSign(t, digests, r.Signer, r.SignedAt, 0))
	if r.Key != nil {
		s.Put(path+".sig", r.Key.DetachSign(t, data, r.SignedAt))
	}
}

// Digests is a DIGESTS file as Flatcar writes it.
func Digests(name string, data []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# MD5 HASH\n%x  %s\n", md5.Sum(data), name)
	fmt.Fprintf(&b, "# SHA1 HASH\n%x  %s\n", sha1.Sum(data), name)
	fmt.Fprintf(&b, "# SHA512 HASH\n%x  %s\n", sha512.Sum512(data), name)
	return b.Bytes()
}

var (
	bzMu    sync.Mutex
	bzCache = map[[sha512.Size]byte][]byte{}
)

// Bzip2 compresses data into one bzip2 stream of 900k blocks, the shape of Flatcar's lbzip2
// files, with github.com/dsnet/compress (no lbzip2 needed; pkg/fetch's TestStreamDecodesLbzip2
// covers lbzip2's own encoder output). Memoized in the process and, content-addressed, in the user's cache
// directory: the Go encoder is slow (~1 MB/s, far slower under -race) and test runs repeat.
func Bzip2(t testing.TB, data []byte) []byte {
	t.Helper()
	key := sha512.Sum512(data)
	bzMu.Lock()
	defer bzMu.Unlock()
	if b, ok := bzCache[key]; ok {
		return b
	}
	cached := bz2CachePath(key)
	if b, err := os.ReadFile(cached); err == nil && cached != "" {
		bzCache[key] = b
		return b
	}
	var out bytes.Buffer
	zw, err := dsbzip2.NewWriter(&out, &dsbzip2.WriterConfig{Level: dsbzip2.BestCompression})
	if err != nil {
		t.Fatalf("bzip2 writer: %v", err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatalf("bzip2: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("bzip2: %v", err)
	}
	bzCache[key] = out.Bytes()
	if cached != "" && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		tmp := fmt.Sprintf("%s.%d.tmp", cached, os.Getpid())
		if os.WriteFile(tmp, out.Bytes(), 0o644) == nil {
			os.Rename(tmp, cached) // another process may write the same bytes: either wins
		}
		os.Remove(tmp)
	}
	return out.Bytes()
}

// bz2CachePath is where the .bz2 of the content with that sha512 is kept ("" = no cache).
func bz2CachePath(key [sha512.Size]byte) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "flatcar-capo", "fetchtest-bz2", fmt.Sprintf("%x.bz2", key[:16]))
}

// image is size bytes of deterministic content that compresses like a disk image: random runs
// between runs of zeros, so its .bz2 has several blocks.
func image(size int, seed int64) []byte {
	rng := rand.New(rand.NewSource(seed))
	b := make([]byte, size)
	for off := 0; off < size; {
		n := 4096 + rng.Intn(64<<10)
		if off+n > size {
			n = size - off
		}
		if rng.Intn(3) > 0 {
			rng.Read(b[off : off+n])
		}
		off += n
	}
	return b
}
