// Package glance uploads images into OpenStack Glance the way CAPO needs them: authenticated like
// the openstack CLI (clouds.yaml or OS_* variables), streamed with a known length, verified by
// sha512, idempotent by name, and leaving no half-made image behind.
package glance

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Cloud is an authenticated connection to one cloud's image service in one region.
type Cloud struct {
	Name    string // the clouds.yaml name, or "env" for OS_* variables
	Region  string
	Project string // the token's project ID (or the scope asked for)
	// ProjectID is the token's project ID, "" when the token names none: the owner of the
	// images that are this project's to prune.
	ProjectID string
	Provider  *gophercloud.ProviderClient
	Image     *gophercloud.ServiceClient
	// endpoints finds the cloud's other services (Barbican, for image signing) in its catalog.
	endpoints gophercloud.EndpointOpts
}

// Label names the cloud and region in messages and progress lines.
func (c *Cloud) Label() string {
	if c.Region == "" {
		return c.Name
	}
	return c.Name + "/" + c.Region
}

// Connect authenticates to the cloud called name in clouds.yaml; an empty name means OS_CLOUD,
// and without OS_CLOUD the plain OS_* variables. The returned client re-authenticates by itself
// when its token expires.
func Connect(ctx context.Context, name string) (*Cloud, error) {
	name = cmp.Or(name, os.Getenv("OS_CLOUD"))
	var opts []clouds.ParseOption
	label := name
	if name == "" {
		yamlDoc, err := envCloudYAML()
		if err != nil {
			return nil, err
		}
		label = "env"
		opts = append(opts, clouds.WithCloudName(label), clouds.WithCloudsYAML(strings.NewReader(yamlDoc)))
	} else {
		path, err := findCloudsYAML(name)
		if err != nil {
			return nil, err
		}
		doc, err := oneCloudYAML(path, name)
		if err != nil {
			return nil, err
		}
		opts = append(opts, clouds.WithCloudName(name), clouds.WithCloudsYAML(bytes.NewReader(doc)))
		sec := secureYAMLFor(path)
		if st, err := os.Stat(sec); err == nil && st.Mode().IsRegular() {
			secDoc, err := oneCloudYAML(sec, name)
			if err != nil {
				return nil, err
			}
			if secDoc != nil {
				opts = append(opts, clouds.WithSecureYAML(bytes.NewReader(secDoc)))
			}
		}
	}
	ao, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		return nil, fmt.Errorf("reading the credentials of cloud %q: %s", label, redact.String(hideValues(err.Error())))
	}
	for _, s := range []string{ao.Password, ao.ApplicationCredentialSecret, ao.TokenID} {
		redact.Secret(s)
	}
	redact.SecretsOfURL(ao.IdentityEndpoint)
	ao.AllowReauth = ao.TokenID == "" // a bare token cannot be renewed
	c := &Cloud{Name: label, Region: eo.Region, endpoints: eo}

	provider, err := openstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return nil, fmt.Errorf("cloud %s: invalid auth_url %q: %s", label, redact.URL(ao.IdentityEndpoint), redact.String(err.Error()))
	}
	provider.HTTPClient = http.Client{Transport: tokenSecrets{httpx.GuardRedirects(newTransport(tlsConfig))}}
	provider.UserAgent.Prepend("flatcar-capo")
	provider.UseTokenLock()
	// Renew a token that is about to expire before a request (a long upload must not start with a
	// token that dies under it); a 401 later still triggers one re-authentication.
	provider.ReauthBeforeTokenExpiration = 5 * time.Minute
	if err := openstack.Authenticate(ctx, provider, ao); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cloud %s: authenticating at %s: %w", label, redact.URL(ao.IdentityEndpoint), ctx.Err())
		}
		return nil, authError(label, redact.URL(ao.IdentityEndpoint), err)
	}
	c.Provider = provider
	c.Project = projectOf(provider, ao)
	c.ProjectID = tokenProject(provider)
	c.Image, err = openstack.NewImageV2(provider, eo)
	if err != nil {
		if errors.As(err, new(*gophercloud.ErrEndpointNotFound)) || strings.Contains(err.Error(), "endpoint") {
			region := cmp.Or(eo.Region, "any region")
			return nil, fmt.Errorf("cloud %s: the service catalog has no image (Glance) endpoint in %s; check region_name or ask the cloud operator", label, region)
		}
		if isNetworkError(err) {
			return nil, fmt.Errorf("cloud %s: Glance is unreachable: %w", label, err)
		}
		return nil, fmt.Errorf("cloud %s: %w", label, err)
	}
	return c, nil
}

// projectOf is the project the token is scoped to, by ID; the asked-for scope if the token
// does not say.
func projectOf(p *gophercloud.ProviderClient, ao gophercloud.AuthOptions) string {
	return cmp.Or(tokenProject(p), ao.TenantID+"/"+ao.TenantName+"/"+ao.DomainID+ao.DomainName)
}

// tokenProject is the ID of the project the token is scoped to, "" when it names none.
func tokenProject(p *gophercloud.ProviderClient) string {
	if r, ok := p.GetAuthResult().(tokens.CreateResult); ok {
		if pr, err := r.ExtractProject(); err == nil && pr != nil {
			return pr.ID
		}
	}
	return ""
}

// tokenSecrets registers every Keystone token that goes over the wire (sent as X-Auth-Token,
// issued as X-Subject-Token, renewals included) as a secret: proxies and gateways echo request
// headers in their error pages, in forms no key-based masking catches (JSON arrays, HTML
// tables), and the token must be masked like the password wherever a message shows one.
type tokenSecrets struct{ rt http.RoundTripper }

var seenTokens sync.Map

func (t tokenSecrets) RoundTrip(r *http.Request) (*http.Response, error) {
	registerToken(r.Header.Get("X-Auth-Token"))
	resp, err := t.rt.RoundTrip(r)
	if resp != nil {
		registerToken(resp.Header.Get("X-Subject-Token"))
	}
	return resp, err
}

func registerToken(tok string) {
	if _, seen := seenTokens.LoadOrStore(tok, true); !seen && tok != "" {
		redact.Secret(tok)
	}
}

func newTransport(tlsConfig *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsConfig
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// Glance answers an upload only once it stored every byte; do not wait forever for that.
	t.ResponseHeaderTimeout = 10 * time.Minute
	t.WriteBufferSize = 256 << 10
	return t
}

// authError turns an authentication failure into a message that says what to check, without
// ever echoing the credentials.
func authError(label, authURL string, err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	isHTTP := errors.As(err, &ue)
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusUnauthorized):
		// Keystone's own words may say more (a locked account, an expired password): a short,
		// redacted excerpt, since an echoing proxy may fill the body with the request.
		said := ""
		if isHTTP && len(ue.Body) > 0 {
			said = ": the server said: " + redact.Excerpt(ue.Body, 200)
		}
		return &shownError{fmt.Sprintf("cloud %s: authentication at %s was refused (HTTP 401): check the user name, password or application credential, and the user/project domain%s", label, authURL, said), err}
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return fmt.Errorf("cloud %s: %s is not a Keystone v3 endpoint (HTTP 404): check auth_url", label, authURL)
	case errors.As(err, new(net.Error)): // *net.OpError included
		return &shownError{fmt.Sprintf("cloud %s: Keystone at %s is unreachable: %s", label, authURL, redact.String(err.Error())), err}
	case isHTTP:
		// gophercloud's message carries the whole body, which an echoing proxy fills with the
		// request (the password) and a captive portal with a page of HTML.
		return &shownError{fmt.Sprintf("cloud %s: authenticating at %s: HTTP %d: %s", label, authURL, ue.Actual, redact.Excerpt(ue.Body, 300)), err}
	}
	return &shownError{fmt.Sprintf("cloud %s: authenticating at %s: %s", label, authURL, redact.String(err.Error())), err}
}

// shownError is err with the message that may be shown (redacted, bounded); it still unwraps
// to err, so callers can tell a network failure from a refusal.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }

// findCloudsYAML finds the clouds.yaml the openstack CLI would read and checks that it defines
// name, so that both a missing file and an unknown name get a message naming the file.
func findCloudsYAML(name string) (string, error) {
	var candidates []string
	if p := os.Getenv("OS_CLIENT_CONFIG_FILE"); p != "" {
		candidates = []string{p}
	} else {
		cfg := os.Getenv("XDG_CONFIG_HOME")
		if cfg == "" {
			if home, err := os.UserHomeDir(); err == nil {
				cfg = filepath.Join(home, ".config")
			}
		}
		candidates = []string{"clouds.yaml", filepath.Join(cfg, "openstack", "clouds.yaml"), "/etc/openstack/clouds.yaml"}
	}
	for _, p := range candidates {
		data, err := infile.ReadFile("clouds.yaml", p, infile.CloudsYAML)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		var doc struct {
			Clouds map[string]any `yaml:"clouds"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return "", fmt.Errorf("%s is not valid YAML: %w", p, err)
		}
		if _, ok := doc.Clouds[name]; !ok {
			names := slices.Sorted(maps.Keys(doc.Clouds))
			return "", errs.Invalidf("cloud %q is not defined in %s (it defines: %s)", name, p, strings.Join(names, ", "))
		}
		return p, nil
	}
	return "", errs.Invalidf("cloud %q was asked for, but no clouds.yaml was found (looked at %s); set OS_CLIENT_CONFIG_FILE or use OS_* variables", name, strings.Join(candidates, ", "))
}
