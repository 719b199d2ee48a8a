package images

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Mirror is one --registry-mirror REGISTRY=URL ("*" for every registry).
type Mirror struct {
	Registry string // containerd's name (docker.io, registry.k8s.io) or "*"
	URL      string // scheme://host[:port], no path
	Host     string // host[:port] of URL
	Insecure bool   // http://
}

// ParseMirror reads REGISTRY=URL.
func ParseMirror(s string) (Mirror, error) {
	reg, raw, ok := strings.Cut(s, "=")
	reg = strings.TrimSpace(reg)
	bad := func(why string) (Mirror, error) {
		return Mirror{}, fmt.Errorf("invalid --registry-mirror %q: %s; want REGISTRY=URL, e.g. registry.k8s.io=https://mirror.example:5000 or *=https://mirror.example:5000", s, why)
	}
	if !ok || reg == "" || strings.ContainsAny(reg, "/ ") {
		return bad("no REGISTRY= before the URL")
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return bad("the URL must be http(s)://host[:port]")
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return bad("the URL must have no path, query or user (the mirror serves /v2/ at its root)")
	}
	if reg == "index.docker.io" || reg == "registry-1.docker.io" {
		reg = "docker.io"
	}
	return Mirror{Registry: reg, URL: u.Scheme + "://" + u.Host, Host: u.Host, Insecure: u.Scheme == "http"}, nil
}

// Mirrors maps a registry to its mirror.
type Mirrors []Mirror

// For returns the mirror of registry (an exact entry wins over "*"), or false.
func (ms Mirrors) For(registry string) (Mirror, bool) {
	var star *Mirror
	for i, m := range ms {
		if m.Registry == registry {
			return m, true
		}
		if m.Registry == "*" {
			star = &ms[i]
		}
	}
	if star != nil {
		return *star, true
	}
	return Mirror{}, false
}

// Options say where and how images are pulled.
type Options struct {
	Arch     string // amd64 or arm64: the node's platform is linux/<Arch>
	CacheDir string // blobs under <CacheDir>/images/blobs/sha256
	Mirrors  Mirrors
	CAFile   string // --registry-ca: PEM, added to the system roots
	// Transport makes the HTTP transport (the project's timeouts, httpx.NewTransportTLS) with the
	// TLS settings given; nil: Go's default transport.
	Transport func(*tls.Config) http.RoundTripper
	Jobs      int // parallel blob downloads (default 4)
	Logf      func(format string, a ...any)
}

// transport returns the transport with the CA added to the system roots.
func (o *Options) transport() (http.RoundTripper, error) {
	var cfg *tls.Config
	if o.CAFile != "" {
		pool, err := LoadCA(o.CAFile)
		if err != nil {
			return nil, err
		}
		cfg = &tls.Config{RootCAs: pool}
	}
	if o.Transport != nil {
		return httpx.GuardRedirects(o.Transport(cfg)), nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		tr.TLSClientConfig = cfg
	}
	return httpx.GuardRedirects(tr), nil
}

// LoadCA returns the system roots plus the PEM certificates of file.
func LoadCA(file string) (*x509.CertPool, error) {
	pem, err := infile.ReadFile("--registry-ca", file, infile.CA)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--registry-ca %s: no PEM certificate in it (want the CA certificate, -----BEGIN CERTIFICATE-----)", file)
	}
	return pool, nil
}

// Registries are the registries refs come from, sorted (for the containerd settings).
func Registries(refs []Ref) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Registry())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
