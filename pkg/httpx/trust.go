package httpx

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
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
	data, err := infile.ReadFile("--ca-file", o.CAFile, infile.CA)
	if err != nil {
		return errs.Invalid(err)
	}
	certs, err := certificatesOnly("--ca-file", o.CAFile, data)
	if err != nil {
		return err
	}
	o.caPEM = certs
	return nil
}

// CAPEM is --ca-file's certificates (its CERTIFICATE blocks only), read by Validate; nil
// without one. manifests puts them on the nodes.
func (o Options) CAPEM() []byte { return o.caPEM }

// certificatesOnly returns the CERTIFICATE blocks of a PEM CA bundle (each one a certificate
// that parses), re-encoded without the text around them. Any other block is refused (an
// errs.ErrInvalid naming it and the fix): a bundle holding a certificate and its private key is
// common, and what a CA file holds is trusted and, by manifests, copied into every node's
// user-data.
func certificatesOnly(flag, path string, data []byte) ([]byte, error) {
	var out bytes.Buffer
	for n := 1; ; n++ {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, errs.Invalidf("%s %s holds a %s (PEM block %d), not only CA certificates; a CA file is trusted and manifests copies it to every node: "+
				"keep only its CERTIFICATE blocks (openssl crl2pkcs7 -nocrl -certfile %s | openssl pkcs7 -print_certs -out ca.pem)", flag, path, b.Type, n, path)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, errs.Invalidf("%s %s: PEM block %d is not a certificate that parses (%v): give the CA certificate(s), PEM", flag, path, n, err)
		}
		pem.Encode(&out, &pem.Block{Type: b.Type, Bytes: b.Bytes})
	}
	if out.Len() == 0 {
		return nil, errs.Invalidf("%s %s: no PEM certificate in it (want the CA certificate, -----BEGIN CERTIFICATE-----)", flag, path)
	}
	return out.Bytes(), nil
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

// isUntrusted says whether err is a TLS certificate no trusted CA signed.
func isUntrusted(err error) bool {
	return errors.As(err, new(x509.UnknownAuthorityError)) || errors.As(err, new(*tls.CertificateVerificationError)) ||
		(err != nil && strings.Contains(err.Error(), "x509: certificate signed by unknown authority"))
}

// untrustedFix is what to do about an untrusted certificate of a build-host download.
const untrustedFix = "pass --ca-file FILE with the CA that signed it (PEM; or point SSL_CERT_FILE at a bundle that has it)"

// untrusted is err as a message naming the server and the fix.
func untrusted(rawURL string, err error) error {
	host := rawURL
	if u, perr := url.Parse(rawURL); perr == nil {
		host = u.Host
	}
	return fmt.Errorf("GET %s: the TLS certificate of %s is not trusted (x509: certificate signed by unknown authority): %s", rawURL, host, untrustedFix)
}

// ProxyRefusedError is a proxy that answered a CONNECT (an https:// request through it) with
// anything but 200, as an air-gapped site's proxy answers a host it does not let through. Go's
// own error is the bare status text ("Forbidden"), which reads as the server's answer.
type ProxyRefusedError struct{ Proxy, Target, Status string }

func (e *ProxyRefusedError) Error() string {
	return fmt.Sprintf("the proxy %s refused to connect to %s (CONNECT answered %s)", e.Proxy, e.Target, e.Status)
}

// CheckProxyConnect is an http.Transport's OnProxyConnectResponse: a refused CONNECT is a
// ProxyRefusedError.
func CheckProxyConnect(_ context.Context, proxy *url.URL, req *http.Request, res *http.Response) error {
	if res.StatusCode == http.StatusOK {
		return nil
	}
	return &ProxyRefusedError{Proxy: proxy.Host, Target: req.Host, Status: res.Status}
}
