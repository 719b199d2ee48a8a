// Package signingtest makes signing keys and X.509 certificates for tests, fresh in every run.
package signingtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Kinds of key.
const (
	P256    = "p256"
	P384    = "p384"
	P521    = "p521"
	RSA3072 = "rsa3072"
)

// Key writes a new private key of kind as PKCS#8 PEM (0600) to dir/name and returns its path
// and signer.
func Key(t testing.TB, dir, name, kind string) (string, crypto.Signer) {
	t.Helper()
	var (
		s   crypto.Signer
		err error
	)
	switch kind {
	case P256:
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case P384:
		s, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case P521:
		s, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case RSA3072:
		s, err = rsa.GenerateKey(rand.Reader, 3072)
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// PublicKey writes the PKIX PEM of s's public key to dir/name.
func PublicKey(t testing.TB, dir, name string, s crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Cert writes a self-signed certificate of s, valid from notBefore to notAfter, to dir/name.
func Cert(t testing.TB, dir, name string, s crypto.Signer, notBefore, notAfter time.Time) string {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "flatcar-capo test " + name, Organization: []string{"flatcar-capo tests"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.Public(), s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ValidCert is a certificate valid from an hour ago for a month.
func ValidCert(t testing.TB, dir, name string, s crypto.Signer) string {
	return Cert(t, dir, name, s, time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour))
}
