package glance

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/secrets"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// Signing asks for an OpenStack image signature: the img_signature* properties that Glance checks
// while the data arrives (and refuses the upload when they do not verify) and Nova checks again
// at boot with verify_glance_signatures. The certificate is one already in the cloud's Barbican
// (CertUUID) or one given as a file (Cert), which is stored in each cloud's Barbican once.
type Signing struct {
	Key      *signing.Key
	CertUUID string
	Cert     *x509.Certificate
	CertPath string
	// Now is the clock of the certificate's validity check (time.Now when nil).
	Now func() time.Time

	mu    sync.Mutex
	props map[string]map[string]string // per cloud label
}

// Validate checks what can be checked without a cloud: the key suits Glance, and a certificate
// file matches it and is valid now. Its errors wrap errs.ErrInvalid.
func (s *Signing) Validate() error {
	if s == nil {
		return nil
	}
	if (s.CertUUID == "") == (s.Cert == nil) {
		return errs.Invalidf("--sign-key needs exactly one of --sign-cert-uuid (a certificate in Barbican) and --sign-cert (a PEM file, stored in Barbican for you)")
	}
	if s.CertUUID != "" && !uuidRe.MatchString(s.CertUUID) {
		return errs.Invalidf("--sign-cert-uuid %q is not a UUID (Barbican names secrets like 0c3e6a5b-5f41-4b9a-9d2b-3f1f6a7b8c9d: the last part of the secret's href in openstack secret list)", s.CertUUID)
	}
	if _, err := signing.GlanceKeyType(s.Key.Public()); err != nil {
		return err
	}
	if s.Cert != nil {
		return signing.CheckCertificate(s.Cert, s.Key, s.CertPath, s.now())
	}
	return nil
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (s *Signing) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// properties returns the img_signature* properties for cloud c: the certificate is found (or
// stored) in c's Barbican and checked against the key, and the image's bytes, hashed once for all
// clouds, are signed. Nothing is created in Glance before this succeeds.
func (s *Signing) properties(ctx context.Context, c *Cloud, req *Request) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.props[c.Label()]; p != nil {
		return p, nil
	}
	km, err := openstack.NewKeyManagerV1(c.Provider, c.endpoints)
	if err != nil {
		if isNetworkError(err) {
			return nil, fmt.Errorf("image signing needs Barbican, which is unreachable (%v); nothing was uploaded", err)
		}
		return nil, fmt.Errorf("image signing needs Barbican, but the service catalog has no key-manager endpoint (%v); nothing was uploaded", err)
	}
	uuid := s.CertUUID
	if uuid != "" {
		cert, err := fetchCertificate(ctx, c, km, uuid, "--sign-cert-uuid")
		if err != nil {
			return nil, err
		}
		if err := signing.CheckCertificate(cert, s.Key, "in Barbican "+uuid, s.now()); err != nil {
			return nil, err
		}
	} else if uuid, err = storeCertificate(ctx, c, km, s.Cert, req.log()); err != nil {
		return nil, err
	}
	sumHex, err := req.localHashes.get(ctx, req, "sha512", c.Label())
	if err != nil {
		return nil, err
	}
	sum, _ := hex.DecodeString(sumHex)
	p, err := signing.GlanceSignature(s.Key, sum, uuid)
	if err != nil {
		return nil, err
	}
	if s.props == nil {
		s.props = map[string]map[string]string{}
	}
	s.props[c.Label()] = p
	return p, nil
}

// certName names a stored certificate by its fingerprint, so a second upload finds and reuses it.
func certName(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "flatcar-capo image signing certificate sha256:" + hex.EncodeToString(sum[:])
}

// barbicanTimeout bounds each Barbican request, its answer's body included (httpx's stall
// timeout): the transport is Glance's, which waits up to 10 minutes for an upload's answer.
var barbicanTimeout = httpx.DefaultStallTimeout

// barbicanCall runs one Barbican request under barbicanTimeout; a request cut off by it says so.
func barbicanCall[T any](ctx context.Context, c *Cloud, km *gophercloud.ServiceClient, what string, call func(context.Context) (T, error)) (T, error) {
	bctx, cancel := context.WithTimeout(ctx, barbicanTimeout)
	defer cancel()
	v, err := call(bctx)
	if err != nil && ctx.Err() == nil && bctx.Err() != nil {
		return v, fmt.Errorf("%s: Barbican at %s did not answer within %s; image signing needs it, nothing was uploaded", what, redact.URL(km.Endpoint), barbicanTimeout)
	}
	if err != nil {
		return v, barbicanError(c, km, what, err)
	}
	return v, nil
}

// storeCertificate stores cert in Barbican as castellan reads it (secret_type certificate, PEM
// payload) unless a certificate of the same fingerprint is there, and returns its UUID. A
// secret found by the name is read and used only when it holds this very certificate: anyone
// may store a secret under that name.
func storeCertificate(ctx context.Context, c *Cloud, km *gophercloud.ServiceClient, cert *x509.Certificate, log io.Writer) (string, error) {
	name := certName(cert)
	found, err := barbicanCall(ctx, c, km, "listing certificates", func(ctx context.Context) ([]secrets.Secret, error) {
		pages, err := secrets.List(km, secrets.ListOpts{Name: name}).AllPages(ctx)
		if err != nil {
			return nil, err
		}
		return secrets.ExtractSecrets(pages)
	})
	if err != nil {
		return "", err
	}
	for _, sec := range found {
		if sec.Name != name || sec.SecretType != string(secrets.CertificateSecret) || sec.Status != "ACTIVE" {
			continue
		}
		id := secretUUID(sec.SecretRef)
		theirs, err := fetchCertificate(ctx, c, km, id, "")
		if err == nil && theirs.Equal(cert) {
			return id, nil
		}
		why := "another certificate"
		if err != nil {
			why = "no certificate it could read (" + err.Error() + ")"
		}
		fmt.Fprintf(log, "%s: the Barbican secret %s is named %q but holds %s: not used; storing this certificate anew\n", c.Label(), id, name, why)
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	// octet-stream, not text/plain: barbicanclient hands castellan a text payload as str, which
	// cryptography's PEM loader refuses.
	created, err := barbicanCall(ctx, c, km, "storing the certificate", func(ctx context.Context) (*secrets.Secret, error) {
		return secrets.Create(ctx, km, secrets.CreateOpts{
			Name:                   name,
			SecretType:             secrets.CertificateSecret,
			Payload:                base64.StdEncoding.EncodeToString(pemCert),
			PayloadContentType:     "application/octet-stream",
			PayloadContentEncoding: "base64",
		}).Extract()
	})
	if err != nil {
		return "", err
	}
	return secretUUID(created.SecretRef), nil
}

// fetchCertificate reads the certificate uuid from Barbican, as Glance will; flag names the
// option that named it (--sign-cert-uuid), "" for one found by name.
func fetchCertificate(ctx context.Context, c *Cloud, km *gophercloud.ServiceClient, uuid, flag string) (*x509.Certificate, error) {
	what := "reading the certificate " + uuid
	sec, err := barbicanCall(ctx, c, km, what, func(ctx context.Context) (*secrets.Secret, error) {
		return secrets.Get(ctx, km, uuid).Extract()
	})
	if err != nil {
		if flag != "" && errors.As(err, new(*barbicanHTTPError)) && err.(*barbicanHTTPError).status == http.StatusNotFound {
			return nil, errs.Invalidf("--sign-cert-uuid %s: Barbican of cloud %s has no such secret; store the certificate first (openstack secret store --secret-type certificate ...) or pass --sign-cert CERT.pem", uuid, c.Label())
		}
		return nil, err
	}
	if sec.SecretType != string(secrets.CertificateSecret) {
		return nil, errs.Invalidf("--sign-cert-uuid %s is a %s secret in Barbican, not a certificate: Glance would refuse it", uuid, sec.SecretType)
	}
	data, err := barbicanCall(ctx, c, km, what, func(ctx context.Context) ([]byte, error) {
		return secrets.GetPayload(ctx, km, uuid, secrets.GetPayloadOpts{PayloadContentType: "application/octet-stream"}).Extract()
	})
	if err != nil {
		return nil, err
	}
	return signing.ParseCertificate(data, cmp.Or(flag, "the Barbican secret")+" "+uuid)
}

func secretUUID(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

// barbicanError says which Barbican step failed where, in one line.
func barbicanError(c *Cloud, km *gophercloud.ServiceClient, what string, err error) error {
	var ue gophercloud.ErrUnexpectedResponseCode
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ue):
		return &barbicanHTTPError{fmt.Sprintf("%s: Barbican at %s answered HTTP %d: %s; nothing was uploaded", what, redact.URL(km.Endpoint), ue.Actual, redact.Excerpt(ue.Body, 200)), ue.Actual}
	case isNetworkError(err):
		return fmt.Errorf("%s: Barbican at %s is unreachable (%v); image signing needs it, nothing was uploaded", what, redact.URL(km.Endpoint), err)
	}
	return fmt.Errorf("%s at %s: %w; nothing was uploaded", what, redact.URL(km.Endpoint), err)
}

type barbicanHTTPError struct {
	msg    string
	status int
}

func (e *barbicanHTTPError) Error() string { return e.msg }

// cached is what properties returned for c (nil without signing).
func (s *Signing) cached(c *Cloud) map[string]string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.props[c.Label()]
}

// sameCertificate refuses to reuse an image that is unsigned or signed under another certificate
// when this upload is signed: the caller asked for a signature Nova can check.
func (s *Signing) sameCertificate(c *Cloud, img images.Image) error {
	want := s.cached(c)[signing.PropCertUUID]
	if want == "" {
		return nil
	}
	got, _ := img.Properties[signing.PropCertUUID].(string)
	_, signed := img.Properties[signing.PropSignature]
	switch {
	case !signed || got == "":
		return errors.New("no image signature")
	case got != want:
		return fmt.Errorf("signed under another certificate (%s, not %s)", got, want)
	}
	return nil
}
