// Package containerdtest plays GitHub's release downloads for containerd and runc in tests
// (a stand-in for the internet): a containerd release tarball made from real containerd
// binaries (scripts/install-containerd.sh builds them) and a runc binary, each with the
// checksum file its release publishes, on a fetchtest.Server in GitHub's layout.
package containerdtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/containerd"
)

// Binaries are the tarball's bin/ members, as containerd's release has them (but
// containerd-stress, which the test builds leave out).
var Binaries = []string{"containerd", "ctr", "containerd-shim-runc-v2"}

// Release is what Publish served.
type Release struct {
	Options        containerd.Options // Version, Runc, Arch; GitHubMirror is the server
	Tarball, Runc  []byte
	TarballSHA256  string
	RuncSHA256     string
	TarballPath    string // on the server
	RuncPath       string
	TarballSumPath string
}

// Publish serves containerd o.Version's tarball (Binaries from binDir) and runc o.Runc (the
// file runcBin) for o.Arch (amd64 when empty) on s, with containerd's .sha256sum and runc's
// runc.sha256sum (which lists other assets too, as the real one does).
func Publish(t testing.TB, s *fetchtest.Server, o containerd.Options, binDir, runcBin string) Release {
	t.Helper()
	o.GitHubMirror = s.URL
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	mtime := time.Unix(1700000000, 0)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime})
	for _, b := range Binaries {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + b, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	runc, err := os.ReadFile(runcBin)
	if err != nil {
		t.Fatal(err)
	}
	r := Release{Options: o, Tarball: buf.Bytes(), Runc: runc, TarballSHA256: sum(buf.Bytes()), RuncSHA256: sum(runc)}
	r.TarballPath = strings.TrimPrefix(o.TarballURL(), s.URL)
	r.TarballSumPath = r.TarballPath + ".sha256sum"
	r.RuncPath = strings.TrimPrefix(o.RuncURL(), s.URL)
	s.Put(r.TarballPath, r.Tarball)
	s.Put(r.TarballSumPath, []byte(fmt.Sprintf("%s  %s\n", r.TarballSHA256, filepath.Base(r.TarballPath))))
	s.Put(r.RuncPath, runc)
	other := sum([]byte("runc.tar.xz"))
	s.Put(strings.TrimPrefix(o.RuncSumsURL(), s.URL), []byte(fmt.Sprintf("%s  libseccomp-2.5.6.tar.gz\n%s  runc.%s\n%s  runc.tar.xz\n", other, r.RuncSHA256, o.Arch, other)))
	return r
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
