package httpx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// loadCA reads --ca-file: PEM certificates trusted on top of the system roots by every client.
func (o *Options) loadCA() error {
	if o.CAFile == "" || o.caPEM != nil {
		return nil
	}
	pem, err := infile.ReadFile("--ca-file", o.CAFile, infile.CA)
	if err != nil {
		return errs.Invalid(err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return errs.Invalidf("--ca-file %s: no PEM certificate in it (want the CA certificate, -----BEGIN CERTIFICATE-----)", o.CAFile)
	}
	o.caPEM = pem
	return nil
}

// trust adds --ca-file's certificates to cfg's roots (the system's when cfg has none).
func (o Options) trust(cfg *tls.Config) *tls.Config {
	if len(o.caPEM) == 0 {
		return cfg
	}
	if cfg = cfg.Clone(); cfg == nil {
		cfg = &tls.Config{}
	}
	pool := cfg.RootCAs
	if pool == nil {
		if pool, _ = x509.SystemCertPool(); pool == nil {
			pool = x509.NewCertPool()
		}
	} else {
		pool = pool.Clone()
	}
	pool.AppendCertsFromPEM(o.caPEM)
	cfg.RootCAs = pool
	return cfg
}

// IsUntrusted says whether err is a TLS certificate no trusted CA signed.
func IsUntrusted(err error) bool {
	return errors.As(err, new(x509.UnknownAuthorityError)) || errors.As(err, new(*tls.CertificateVerificationError)) ||
		(err != nil && strings.Contains(err.Error(), "x509: certificate signed by unknown authority"))
}

// UntrustedFix is what to do about an untrusted certificate of a build-host download.
const UntrustedFix = "pass --ca-file FILE with the CA that signed it (PEM; or point SSL_CERT_FILE at a bundle that has it)"

// untrusted is err as a message naming the server and the fix.
func untrusted(rawURL string, err error) error {
	host := rawURL
	if u, perr := url.Parse(rawURL); perr == nil {
		host = u.Host
	}
	return fmt.Errorf("GET %s: the TLS certificate of %s is not trusted (x509: certificate signed by unknown authority): %s", rawURL, host, UntrustedFix)
}
