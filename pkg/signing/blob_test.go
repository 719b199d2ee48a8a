package signing_test

import (
	"bytes"
	"crypto"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// cosignVerifyBlob is what `cosign verify-blob --key PUB --signature SIG BLOB` does for a key
// file (cosign's sigs.LoadPublicKeyRaw and VerifyBlobSignature): read the PEM with sigstore's
// cryptoutils, load sigstore's verifier with SHA-256, base64-decode the signature file, verify.
func cosignVerifyBlob(t *testing.T, pubPEM, sigFile, blob string) error {
	t.Helper()
	raw, err := os.ReadFile(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(raw)
	if err != nil {
		t.Fatalf("sigstore cannot read the public key: %v", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatalf("sigstore cannot load a verifier for it: %v", err)
	}
	b64, err := os.ReadFile(sigFile)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b64)))
	if err != nil {
		t.Fatalf("the signature is not base64: %v", err)
	}
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	return v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(data))
}

// The .sig files verify with sigstore's own verifier (cosign's library), and a changed blob or
// another key's signature does not, for every key type --sign-key takes; signing.VerifyFile
// (flatcar-capo verify) gives the same verdicts.
func TestSignFileVerifiesWithCosignsVerifier(t *testing.T) {
	for _, kind := range []string{signingtest.P256, signingtest.P384, signingtest.P521, signingtest.RSA3072} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			keyPath, signer := signingtest.Key(t, dir, "key.pem", kind)
			pubPath := signingtest.PublicKey(t, dir, "key.pub", signer)
			_, other := signingtest.Key(t, dir, "other.pem", kind)
			otherPub := signingtest.PublicKey(t, dir, "other.pub", other)
			blob := filepath.Join(dir, "image.qcow2")
			data := make([]byte, 3<<20+17)
			rand.New(rand.NewSource(7)).Read(data)
			if err := os.WriteFile(blob, data, 0o644); err != nil {
				t.Fatal(err)
			}
			key, err := signing.LoadKey(keyPath)
			if err != nil {
				t.Fatal(err)
			}
			sigPath, err := signing.SignFile(key, blob)
			if err != nil {
				t.Fatal(err)
			}
			if sigPath != blob+".sig" {
				t.Fatalf("signature written to %s, want %s.sig", sigPath, blob)
			}
			if err := cosignVerifyBlob(t, pubPath, sigPath, blob); err != nil {
				t.Fatalf("cosign's verifier refuses the signature: %v", err)
			}
			pub, err := signing.LoadPublicKey(pubPath, "--key")
			if err != nil {
				t.Fatal(err)
			}
			if err := signing.VerifyFile(pub, blob, sigPath); err != nil {
				t.Fatalf("VerifyFile refuses a good signature: %v", err)
			}
			// Another key: both refuse.
			if cosignVerifyBlob(t, otherPub, sigPath, blob) == nil {
				t.Fatal("cosign's verifier accepts the signature with another key")
			}
			otherKey, _ := signing.LoadPublicKey(otherPub, "--key")
			if err := signing.VerifyFile(otherKey, blob, sigPath); !errors.Is(err, signing.ErrBadSignature) {
				t.Fatalf("VerifyFile with another key: %v, want ErrBadSignature", err)
			}
			// One byte changed: both refuse.
			data[len(data)/2] ^= 1
			if err := os.WriteFile(blob, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if cosignVerifyBlob(t, pubPath, sigPath, blob) == nil {
				t.Fatal("cosign's verifier accepts the signature of a changed blob")
			}
			if err := signing.VerifyFile(pub, blob, sigPath); !errors.Is(err, signing.ErrBadSignature) {
				t.Fatalf("VerifyFile of a changed blob: %v, want ErrBadSignature", err)
			}
		})
	}
}

// A key file as `cosign generate-key-pair` writes it (sigstore's GeneratePEMEncodedECDSAKeyPair
// with a password: "ENCRYPTED SIGSTORE PRIVATE KEY") signs with $COSIGN_PASSWORD, and cosign's
// verifier accepts the result with the public key written beside it; a wrong or missing password
// is the caller's error.
func TestCosignKeyFile(t *testing.T) {
	dir := t.TempDir()
	priv, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("s3cret-pass")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("sigstore wrote another key format:\n%s", priv)
	}
	keyPath, pubPath, blob := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "record.json")
	os.WriteFile(keyPath, priv, 0o600)
	os.WriteFile(pubPath, pubPEM, 0o644)
	os.WriteFile(blob, []byte(`{"imageName":"x"}`), 0o644)

	t.Setenv(signing.PasswordEnv, "wrong")
	if _, err := signing.LoadKey(keyPath); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "wrong password") {
		t.Fatalf("wrong password: %v", err)
	}
	t.Setenv(signing.PasswordEnv, "s3cret-pass")
	key, err := signing.LoadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signing.SignFile(key, blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosignVerifyBlob(t, pubPath, sig, blob); err != nil {
		t.Fatalf("cosign's verifier refuses a signature made with a cosign key: %v", err)
	}
	os.Unsetenv(signing.PasswordEnv)
	if _, err := signing.LoadKey(keyPath); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), signing.PasswordEnv) {
		t.Fatalf("no password: %v", err)
	}
}
