package images

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Mirror is one --registry-mirror REGISTRY=URL ("*" for every registry).
type Mirror struct {
	Registry string // containerd's name (docker.io, registry.k8s.io, host:port) or "*"
	URL      string // scheme://host[:port][/v2/PREFIX], as hosts.toml lists it
	Host     string // host[:port] of URL
	Prefix   string // PREFIX of a path-prefixed mirror (Harbor's proxy-cache project), "" without
	Insecure bool   // http://
}

// OverridePath says containerd must take the URL's path as the API root (override_path = true).
func (m Mirror) OverridePath() bool { return m.Prefix != "" }

// mirrorExample is how a --registry-mirror value looks.
const mirrorExample = "want REGISTRY=URL, e.g. registry.k8s.io=https://mirror.example:5000, *=https://mirror.example:5000 or registry.k8s.io=https://harbor.example/v2/PROJECT"

// ParseMirror reads REGISTRY=URL. REGISTRY is "*" or host[:port] (ValidateRegistryName); URL is
// http(s)://host[:port] serving /v2/ at its root, or with a path /v2/PREFIX (a Harbor proxy-cache
// project, a Nexus or Artifactory repository path): repositories are then PREFIX/<repo> there.
func ParseMirror(s string) (Mirror, error) {
	reg, raw, ok := strings.Cut(s, "=")
	reg = strings.ToLower(strings.TrimSpace(reg))
	bad := func(why string) (Mirror, error) {
		return Mirror{}, fmt.Errorf("invalid --registry-mirror %q: %s; %s", s, why, mirrorExample)
	}
	if hasControl(s) {
		return bad("it contains a control character (newline, tab, ...)")
	}
	if !ok || reg == "" {
		return bad("no REGISTRY= before the URL")
	}
	if err := validateRegistryName(reg); err != nil {
		return bad(err.Error())
	}
	u, err := validateHTTPURL(strings.TrimSpace(raw))
	if err != nil {
		return bad("the URL: " + err.Error())
	}
	if u.User != nil {
		return bad("the URL has a user: credentials go in the docker config ($DOCKER_CONFIG/config.json), never in a flag")
	}
	host := strings.ToLower(u.Host)
	p := strings.Trim(u.EscapedPath(), "/")
	prefix := ""
	switch {
	case p == "" || p == "v2":
	case strings.HasPrefix(p, "v2/"):
		prefix = strings.TrimPrefix(p, "v2/")
		if _, err := name.NewRepository(host+"/"+prefix+"/x", name.StrictValidation); err != nil {
			return bad(fmt.Sprintf("the path prefix %q is not a repository path (lowercase a-z, 0-9, '.', '_', '-' between '/')", prefix))
		}
	default:
		return bad(fmt.Sprintf("the path %q does not start with /v2/: a mirror serves the registry API at /v2/ or, path-prefixed, at /v2/PREFIX/ (Harbor: https://harbor.example/v2/PROJECT)", u.Path))
	}
	if reg == "index.docker.io" || reg == "registry-1.docker.io" {
		reg = "docker.io"
	}
	m := Mirror{Registry: reg, URL: u.Scheme + "://" + host, Host: host, Prefix: prefix, Insecure: u.Scheme == "http"}
	if prefix != "" {
		m.URL += "/v2/" + prefix
	}
	return m, nil
}

// ParseMirrors reads every --registry-mirror, in the order given (containerd tries them so).
func ParseMirrors(vals []string) (Mirrors, error) {
	var ms Mirrors
	seen := map[string]bool{}
	for _, v := range vals {
		m, err := ParseMirror(v)
		if err != nil {
			return nil, err
		}
		k := m.Registry + " " + m.URL
		if seen[k] {
			return nil, fmt.Errorf("--registry-mirror %s=%s is given twice: give each mirror once", m.Registry, m.URL)
		}
		seen[k] = true
		ms = append(ms, m)
	}
	return ms, nil
}

// Mirrors are the --registry-mirror values in the order given.
type Mirrors []Mirror

// For returns the mirrors of registry in order: its own entries if it has any, else the "*"
// ones (as containerd picks certs.d/<registry> over certs.d/_default).
func (ms Mirrors) For(registry string) Mirrors {
	var exact, star Mirrors
	for _, m := range ms {
		switch m.Registry {
		case registry:
			exact = append(exact, m)
		case "*":
			star = append(star, m)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return star
}

// HasCatchAll says whether a "*" mirror is given.
func (ms Mirrors) HasCatchAll() bool {
	return slices.ContainsFunc(ms, func(m Mirror) bool { return m.Registry == "*" })
}

// Options say where and how images are pulled.
type Options struct {
	Arch     string  // amd64 or arm64: the node's platform is linux/<Arch>
	CacheDir string  // blobs under <CacheDir>/images/blobs/sha256
	Mirrors  Mirrors // tried in order; the registry itself is never contacted when it has one
	CAFile   string  // --registry-ca: PEM, added to the system roots
	// Transport makes the HTTP transport (the project's timeouts, httpx.NewTransportTLS) with the
	// TLS settings given; nil: Go's default transport.
	Transport func(*tls.Config) http.RoundTripper
	Jobs      int       // parallel blob downloads (default 4)
	Log       io.Writer // one line per image pulled
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
	tr.TLSClientConfig = cfg // nil without a CA, as in Go's default transport
	tr.OnProxyConnectResponse = httpx.CheckProxyConnect
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
