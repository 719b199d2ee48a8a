// Package signing signs what flatcar-capo makes with the user's own key: the OpenStack image
// signature Glance checks on upload and Nova at boot (img_signature*, verified by cursive), and
// detached blob signatures that `cosign verify-blob --key` accepts. It reads PEM keys and X.509
// certificates and refuses the ones those verifiers would refuse, before anything is uploaded.
package signing

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// maxPEM bounds a key or certificate file: a real one is a few KiB.
const maxPEM = 1 << 20

// Key is a private signing key read from a PEM file.
type Key struct {
	Path   string
	Signer crypto.Signer
}

// Public is the key's public half.
func (k *Key) Public() crypto.PublicKey { return k.Signer.Public() }

// PasswordEnv holds the password of a cosign key file, the variable cosign itself reads.
const PasswordEnv = "COSIGN_PASSWORD"

// LoadKey reads a PEM private key: unencrypted PKCS#8 "PRIVATE KEY", "EC PRIVATE KEY" or "RSA
// PRIVATE KEY", or cosign's own key file ("ENCRYPTED SIGSTORE PRIVATE KEY", or the older
// "ENCRYPTED COSIGN PRIVATE KEY": scrypt + NaCl secretbox around PKCS#8, `cosign generate-key-pair`)
// with its password in $COSIGN_PASSWORD. ECDSA and RSA keys sign both kinds of signature.
func LoadKey(path string) (*Key, error) {
	block, err := readPEM(path, "--sign-key")
	if err != nil {
		return nil, err
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		if _, encrypted := block.Headers["DEK-Info"]; encrypted {
			return nil, errs.Invalidf("--sign-key %s is encrypted: write it unencrypted for this run (openssl pkey -in %s -out KEY.pem) and keep that file 0600", path, path)
		}
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		password, ok := os.LookupEnv(PasswordEnv)
		if !ok {
			return nil, errs.Invalidf("--sign-key %s is a cosign key file: set $%s to its password", path, PasswordEnv)
		}
		redact.Secret(password)
		der, derr := encrypted.Decrypt(block.Bytes, []byte(password))
		if derr != nil {
			return nil, errs.Invalidf("--sign-key %s: cannot decrypt the cosign key with $%s (wrong password?): %v", path, PasswordEnv, derr)
		}
		key, err = x509.ParsePKCS8PrivateKey(der)
	case "ENCRYPTED PRIVATE KEY":
		return nil, errs.Invalidf("--sign-key %s is an encrypted PKCS#8 key: write it unencrypted for this run (openssl pkey -in %s -out KEY.pem) and keep that file 0600", path, path)
	default:
		return nil, errs.Invalidf("--sign-key %s holds a %q PEM block, not a private key (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)", path, block.Type)
	}
	if err != nil {
		return nil, errs.Invalidf("--sign-key %s: cannot parse the %s: %v", path, block.Type, err)
	}
	switch s := key.(type) {
	case *ecdsa.PrivateKey:
		return &Key{Path: path, Signer: s}, nil
	case *rsa.PrivateKey:
		if s.N.BitLen() < 2048 {
			return nil, errs.Invalidf("--sign-key %s is a %d-bit RSA key: use 2048 bits or more", path, s.N.BitLen())
		}
		return &Key{Path: path, Signer: s}, nil
	}
	return nil, errs.Invalidf("--sign-key %s is a %T: use an ECDSA (P-384 or P-521 for Glance) or RSA key", path, key)
}

// LoadPublicKey reads a PEM "PUBLIC KEY" (PKIX, what `cosign generate-key-pair` and `openssl pkey
// -pubout` write) or takes the public key of a PEM certificate.
func LoadPublicKey(path, flag string) (crypto.PublicKey, error) {
	block, err := readPEM(path, flag)
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case "PUBLIC KEY":
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, errs.Invalidf("%s %s: cannot parse the public key: %v", flag, path, err)
		}
		return pub, nil
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, errs.Invalidf("%s %s: cannot parse the certificate: %v", flag, path, err)
		}
		return cert.PublicKey, nil
	}
	return nil, errs.Invalidf("%s %s holds a %q PEM block, not a PUBLIC KEY or CERTIFICATE", flag, path, block.Type)
}

// LoadCertificate reads a PEM X.509 certificate file.
func LoadCertificate(path string) (*x509.Certificate, error) {
	block, err := readPEM(path, "--sign-cert")
	if err != nil {
		return nil, err
	}
	if block.Type != "CERTIFICATE" {
		return nil, errs.Invalidf("--sign-cert %s holds a %q PEM block, not a CERTIFICATE", path, block.Type)
	}
	return ParseCertificate(block.Bytes, "--sign-cert "+path)
}

// ParseCertificate parses DER or PEM certificate bytes; what names where they came from.
func ParseCertificate(data []byte, what string) (*x509.Certificate, error) {
	if block, _ := pem.Decode(data); block != nil {
		data = block.Bytes
	}
	cert, err := x509.ParseCertificate(data)
	if err != nil {
		return nil, errs.Invalidf("%s: not an X.509 certificate: %v", what, err)
	}
	return cert, nil
}

// CheckCertificate refuses a certificate that cannot vouch for key's signatures at now: another
// key's, not yet or no longer valid. Glance would accept an expired one; Nova, which checks the
// signature again at boot with certificate validation on, would not.
func CheckCertificate(cert *x509.Certificate, key *Key, what string, now time.Time) error {
	if !samePublic(cert.PublicKey, key.Public()) {
		return errs.Invalidf("--sign-key %s does not match the certificate %s (subject %q): the certificate holds another key's public half", key.Path, what, cert.Subject.String())
	}
	if now.Before(cert.NotBefore) {
		return errs.Invalidf("the certificate %s (subject %q) is not valid before %s", what, cert.Subject.String(), cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(cert.NotAfter) {
		return errs.Invalidf("the certificate %s (subject %q) expired on %s: issue a new one for --sign-key", what, cert.Subject.String(), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

func samePublic(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

func readPEM(path, flag string) (*pem.Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.Invalidf("%s: %v", flag, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, errs.Invalidf("%s %s is not a regular file", flag, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if len(data) > maxPEM {
		return nil, errs.Invalidf("%s %s is larger than %d bytes: not a PEM key or certificate", flag, path, maxPEM)
	}
	block, _ := pem.Decode(bytes.TrimSpace(data))
	if block == nil {
		return nil, errs.Invalidf("%s %s is not PEM (no -----BEGIN ...----- block)", flag, path)
	}
	return block, nil
}

// curveName is a curve's name as cursive spells it after "ECC_".
func curveName(c elliptic.Curve) string {
	switch c {
	case elliptic.P384():
		return "SECP384R1"
	case elliptic.P521():
		return "SECP521R1"
	case elliptic.P256():
		return "SECP256R1"
	}
	return c.Params().Name
}
