// Package registrytest runs a real registry for tests: Debian's docker-registry (distribution)
// on 127.0.0.1 with TLS from a test CA and htpasswd auth, and pushes small images made here
// (from files on this machine) under the names the stand-in kubeadm lists.
package registrytest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/bcrypt"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// User and Password are the registry's htpasswd login.
const (
	User     = "tester"
	Password = "s3cret-registry-pass"
)

// Registry is a running docker-registry.
type Registry struct {
	Host    string // 127.0.0.1:PORT
	CAFile  string // PEM of the CA that signed its certificate
	Storage string // its filesystem storage root
	Dir     string
	// DockerConfig is a directory with config.json holding the login (DOCKER_CONFIG).
	DockerConfig string
	cmd          *exec.Cmd
	pool         *x509.CertPool
}

// Start runs docker-registry in a temp directory until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	testutil.RequireTool(t, "docker-registry")
	dir := t.TempDir()
	r, err := start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Serve runs docker-registry for a program (the demo) until Stop: kept in dir, where a rerun finds
// the same CA and certificate, on port when it is free (else on another one).
func Serve(dir string, port int) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		l.Close()
	} else {
		port = 0
	}
	return startOn(dir, port)
}

func start(dir string) (*Registry, error) { return startOn(dir, 0) }

// startOn starts the registry on port (0: a free one).
func startOn(dir string, port int) (*Registry, error) {
	r := &Registry{Dir: dir, Storage: filepath.Join(dir, "storage"), CAFile: filepath.Join(dir, "ca.pem"), DockerConfig: filepath.Join(dir, "docker")}
	crt, key, err := r.keptCerts()
	if err != nil {
		crt, key, err = r.makeCerts()
	}
	if err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(User+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = testutil.FreePort(); err != nil {
			return nil, err
		}
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)
	if err := writeDockerConfig(r.DockerConfig, r.Host, User, Password); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: flatcar-capo-test
    path: %s
`, r.Storage, r.Host, crt, key, htpasswd)
	cf := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command("docker-registry", "serve", cf)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker-registry: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool}}, Timeout: 2 * time.Second}
	for i := 0; i < 300; i++ {
		resp, err := client.Get("https://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return r, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Stop()
	out, _ := os.ReadFile(log.Name())
	return nil, fmt.Errorf("docker-registry did not answer on %s within 15 s: %s", r.Host, out)
}

// PullRequests counts the manifest and blob GETs and HEADs in the registry's access log so far
// (a pull of any image makes at least one): a test reads it before and after a boot.
func (r *Registry) PullRequests() int {
	n := 0
	for _, s := range r.Seen() {
		if (strings.HasPrefix(s, "GET /v2/") || strings.HasPrefix(s, "HEAD /v2/")) && (strings.Contains(s, "/manifests/") || strings.Contains(s, "/blobs/")) {
			n++
		}
	}
	return n
}

// Seen is every request in the registry's access log so far, as "METHOD PATH" (its logging
// proxies' Seen says the same of theirs).
func (r *Registry) Seen() []string {
	b, _ := os.ReadFile(filepath.Join(r.Dir, "registry.log"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		_, req, ok := strings.Cut(l, "] \"") // combined log format: ... [time] "GET /v2/... HTTP/1.1" 200 ...
		if !ok {
			continue
		}
		if method, rest, ok := strings.Cut(req, " "); ok {
			path, _, _ := strings.Cut(rest, " ")
			out = append(out, method+" "+path)
		}
	}
	return out
}

// Stop ends the registry.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// writeDockerConfig writes dir/config.json with a login for host, as `docker login` does.
func writeDockerConfig(dir, host, user, pass string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return os.WriteFile(filepath.Join(dir, "config.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)), 0o600)
}

// DockerConfigWith writes another docker config dir with the given login and returns it.
func (r *Registry) DockerConfigWith(t testing.TB, user, pass string) string {
	dir := t.TempDir()
	if err := writeDockerConfig(dir, r.Host, user, pass); err != nil {
		t.Fatal(err)
	}
	return dir
}

// keptCerts loads the CA and server certificate an earlier run wrote in r.Dir.
func (r *Registry) keptCerts() (crt, key string, err error) {
	crt, key = filepath.Join(r.Dir, "server.pem"), filepath.Join(r.Dir, "server.key")
	ca, err := os.ReadFile(r.CAFile)
	if err != nil {
		return "", "", err
	}
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return "", "", err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < time.Hour {
		return "", "", fmt.Errorf("%s: unreadable or expiring: %v", crt, err)
	}
	r.pool = x509.NewCertPool()
	if !r.pool.AppendCertsFromPEM(ca) {
		return "", "", fmt.Errorf("%s: no certificate", r.CAFile)
	}
	return crt, key, nil
}

// GuestHostIP is this host as a QEMU guest on user networking sees it: a connection there
// reaches the host's 127.0.0.1.
const GuestHostIP = "10.0.2.2"

// makeCerts writes a CA and a server certificate for 127.0.0.1, localhost and GuestHostIP.
func (r *Registry) makeCerts() (crt, key string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flatcar-capo test registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.2.100"), net.ParseIP(GuestHostIP)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return "", "", err
	}
	crt, key = filepath.Join(r.Dir, "server.pem"), filepath.Join(r.Dir, "server.key")
	write := func(p, typ string, der []byte, mode os.FileMode) error {
		return os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
	}
	if err := write(r.CAFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return "", "", err
	}
	if err := write(crt, "CERTIFICATE", srvDER, 0o644); err != nil {
		return "", "", err
	}
	if err := write(key, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return "", "", err
	}
	r.pool = x509.NewCertPool()
	r.pool.AddCert(caCert)
	return crt, key, nil
}

// Pushed is what PushKubeadm pushed: the refs kubeadm lists (registry.k8s.io names), the ref
// on this registry each was pushed as, and the digest its name points to.
type Pushed struct {
	Refs     []string          // kubeadm's names
	At       map[string]string // kubeadm name -> ref on this registry
	Digest   map[string]string // kubeadm name -> digest of what the tag points to
	Manifest map[string]string // kubeadm name -> digest of the linux/amd64 manifest
	Marker   map[string]string // kubeadm name -> what its Cmd prints
	Index    string            // the kubeadm name pushed as a multi-arch index (amd64 + arm64)
}

// busybox is the host's static busybox (busybox-static), the one binary in every test image.
const busybox = "/bin/busybox"

// PushKubeadm pushes one small image for each ref kubeadm lists for refs (as
// registry.k8s.io/...), under the same repository paths on this registry: every image has the
// host's busybox (one shared layer) and a layer of its own, its Cmd prints "preloaded <repo>";
// the pause image is a multi-arch index (amd64 + arm64).
func (r *Registry) PushKubeadm(ctx context.Context, refs []string) (*Pushed, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("the test images carry the host's busybox (apt-get install busybox-static): %w", err)
	}
	shared := testutil.Tar(map[string][]byte{"bin/busybox": bb})
	p := &Pushed{Refs: refs, At: map[string]string{}, Digest: map[string]string{}, Manifest: map[string]string{}, Marker: map[string]string{}}
	for _, ref := range refs {
		rest, ok := strings.CutPrefix(ref, "registry.k8s.io/")
		if !ok {
			return nil, fmt.Errorf("registrytest: %s is not a registry.k8s.io ref", ref)
		}
		at := r.Host + "/" + rest
		repo, _, _ := strings.Cut(rest, ":")
		marker := "preloaded " + repo
		own := testutil.Tar(map[string][]byte{"etc/flatcar-capo-test": []byte(ref + "\n")})
		amd, err := Image{Arch: "amd64", Marker: marker, Layers: [][]byte{shared, own}}.Build()
		if err != nil {
			return nil, err
		}
		md, _ := amd.Digest()
		var d v1.Hash
		if strings.HasSuffix(repo, "/pause") || repo == "pause" {
			arm, err := Image{Arch: "arm64", Marker: marker, Layers: [][]byte{own}}.Build()
			if err != nil {
				return nil, err
			}
			if d, err = r.PushIndex(ctx, at, amd, arm); err != nil {
				return nil, err
			}
			p.Index = ref
		} else if d, err = r.Push(ctx, at, amd); err != nil {
			return nil, err
		}
		p.At[ref], p.Digest[ref], p.Manifest[ref], p.Marker[ref] = at, d.String(), md.String(), marker
	}
	return p, nil
}

// Image is a test image: files in one layer (or more), a config naming its platform and a
// command printing Marker.
type Image struct {
	Arch   string
	Files  map[string][]byte // path in the image -> content (mode 0755)
	Marker string            // printed by the image's Cmd (/bin/busybox echo Marker) when it has busybox
	Layers [][]byte          // extra layers: raw tar contents made by Layer
	// Entrypoint, Cmd and Env are upstream's, for the real images (PushReal, PushFiles).
	Entrypoint, Cmd, Env []string
}

// Build makes the v1.Image.
func (im Image) Build() (v1.Image, error) {
	layers := im.Layers
	if len(im.Files) > 0 || len(layers) == 0 {
		layers = append([][]byte{testutil.Tar(im.Files)}, layers...)
	}
	var ls []v1.Layer
	for _, data := range layers {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	return im.build(ls)
}

func (im Image) build(layers []v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", im.Arch
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	if im.Marker != "" {
		cf.Config.Cmd = []string{"/bin/busybox", "echo", im.Marker}
	}
	if im.Cmd != nil {
		cf.Config.Cmd = im.Cmd
	}
	cf.Config.Entrypoint, cf.Config.Env = im.Entrypoint, im.Env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON), nil
}

// Push writes img as ref (a repo:tag on this registry).
func (r *Registry) Push(ctx context.Context, ref string, img v1.Image) (v1.Hash, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(tag, img, r.opts(ctx)...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return img.Digest()
}

// PushIndex writes a multi-arch index of imgs (one per platform) as ref.
func (r *Registry) PushIndex(ctx context.Context, ref string, imgs ...v1.Image) (v1.Hash, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Hash{}, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture}}})
	}
	if err := remote.WriteIndex(tag, idx, r.opts(ctx)...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return idx.Digest()
}

func (r *Registry) opts(ctx context.Context) []remote.Option {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool}}
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr), remote.WithAuth(&authn.Basic{Username: User, Password: Password})}
}

// BlobFile is where the registry stores blob d on disk (to damage it in a test).
func (r *Registry) BlobFile(d v1.Hash) string {
	return filepath.Join(r.Storage, "docker/registry/v2/blobs", d.Algorithm, d.Hex[:2], d.Hex, "data")
}

// Layer sizes (MiB) like kubeadm's real images for 1.33 (registry.k8s.io, linux/amd64,
// compressed): about 250 MB in all, each image a shared base layer plus its own.
var realSizes = map[string][]int{
	"kube-apiserver": {2, 28}, "kube-controller-manager": {2, 26}, "kube-scheduler": {2, 19},
	"kube-proxy": {2, 30}, "coredns": {2, 21}, "pause": {1}, "etcd": {2, 100},
}

// randomTar is a tar of one file of mib incompressible (seeded) bytes.
func randomTar(seed uint64, mib int) []byte {
	data := make([]byte, mib<<20)
	r := mrand.New(mrand.NewPCG(seed, 7))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	return testutil.Tar(map[string][]byte{fmt.Sprintf("data-%d", seed): data})
}

// PushKubeadmSized pushes kubeadm's refs (registry.k8s.io/...) sized like the real images
// (benchmarks) and returns where each went on this registry.
func (r *Registry) PushKubeadmSized(ctx context.Context, refs []string) ([]string, error) {
	base := randomTar(1, 2)
	var at []string
	for i, ref := range refs {
		repo := strings.TrimPrefix(ref, "registry.k8s.io/")
		short, _, _ := strings.Cut(repo, ":")
		short = short[strings.LastIndex(short, "/")+1:]
		var layers [][]byte
		for j, mib := range realSizes[short] {
			if j == 0 && len(realSizes[short]) > 1 {
				layers = append(layers, base)
			} else {
				layers = append(layers, randomTar(uint64(100+i), mib))
			}
		}
		img, err := Image{Arch: "amd64", Layers: layers}.Build()
		if err != nil {
			return nil, err
		}
		if _, err := r.Push(ctx, r.Host+"/"+repo, img); err != nil {
			return nil, err
		}
		at = append(at, r.Host+"/"+repo)
	}
	return at, nil
}
