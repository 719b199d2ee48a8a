package images

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// explain turns a registry error into one that names the ref, the registry and the fix. It
// never carries credentials: go-containerregistry's errors hold URLs and registry diagnostics,
// and a URL with user info is not something we build.
func explain(r Ref, src source, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: registry %s refused the credentials (%d %s): put a login for %s in the docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json, as `docker login %s` writes it) and check it",
				r.Given, src.host, te.StatusCode, http.StatusText(te.StatusCode), src.host, src.host)
		case http.StatusNotFound:
			what := "tag " + r.Tag
			if r.Digest != "" {
				what = "digest " + r.Digest
			}
			return fmt.Errorf("%s: no such image on %s (%s of %s not found): check the name and %s", r.Given, src.host, what, src.repo.RepositoryStr(), strings.SplitN(what, " ", 2)[0])
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("%s: registry %s refused the credentials (%s): put a login for %s in the docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json) and check it", r.Given, src.host, d.Code, src.host)
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
				return fmt.Errorf("%s: no such image on %s (%s): check the name and tag", r.Given, src.host, d.Code)
			}
		}
	}
	if errors.As(err, new(x509.UnknownAuthorityError)) || errors.As(err, new(*tls.CertificateVerificationError)) || strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		return fmt.Errorf("%s: the TLS certificate of %s is not trusted (x509: certificate signed by unknown authority): pass --registry-ca FILE with the CA that signed it (trusted here and written into the image's containerd settings and trust store; --ca-file trusts it on this host only)", r.Given, src.host)
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return fmt.Errorf("%s: the TLS certificate of %s does not name it (%v): use the name the certificate is for in the ref or --registry-mirror", r.Given, src.host, he)
	}
	if u := asUnreachable(r, src, err); u != nil {
		return u
	}
	if te != nil {
		// go-containerregistry's message carries the whole body, which an echoing proxy fills
		// with the request: a short, redacted excerpt.
		return fmt.Errorf("%s: registry %s answered HTTP %d: %s", r.Given, src.host, te.StatusCode, redact.Excerpt([]byte(te.Error()), 300))
	}
	return fmt.Errorf("%s: %s: %w", r.Given, src.host, err)
}
