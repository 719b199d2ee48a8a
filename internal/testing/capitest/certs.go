package capitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certs is what cert-manager and kubeadm would make: one CA; one serving certificate for
// IP 127.0.0.1 (the API server's and every manager's webhook server, as tls.crt/tls.key in
// WebhookDir); the admin client (system:masters: no RBAC to set up); the service-account key.
type certs struct {
	CA, ServingCert, ServingKey, AdminCert, AdminKey, SAKey, SAPub string
	WebhookDir                                                     string
	caPEM                                                          []byte
}

func makeCerts(dir string) (*certs, error) {
	c := &certs{
		CA: filepath.Join(dir, "ca.crt"), ServingCert: filepath.Join(dir, "serving.crt"), ServingKey: filepath.Join(dir, "serving.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"), WebhookDir: filepath.Join(dir, "webhook-certs"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flatcar-capo capitest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(c.CA, c.caPEM, 0o600); err != nil {
		return nil, err
	}
	leaf := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		return writeKeyPair(certFile, keyFile, der, key)
	}
	if err := leaf(2, pkix.Name{CommonName: "127.0.0.1"}, x509.ExtKeyUsageServerAuth, c.ServingCert, c.ServingKey); err != nil {
		return nil, err
	}
	if err := leaf(3, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, c.AdminCert, c.AdminKey); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.WebhookDir, 0o700); err != nil {
		return nil, err
	}
	for from, to := range map[string]string{c.ServingCert: "tls.crt", c.ServingKey: "tls.key"} {
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(c.WebhookDir, to), b, 0o600); err != nil {
			return nil, err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, err
	}
	return c, writeKey(c.SAKey, sa)
}

func writeKeyPair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writeKey(keyFile, key)
}

func writeKey(file string, key *ecdsa.PrivateKey) error {
	b, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), 0o600)
}
