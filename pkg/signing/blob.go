package signing

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// SigSuffix names a blob's detached signature: ARTIFACT.sig beside ARTIFACT, as `cosign sign-blob
// --output-signature` is usually told to write it.
const SigSuffix = ".sig"

// SignFile writes path+".sig", the detached signature of the file at path (0644: a signature is
// public), and returns its path. The signature is in cosign's encoding: the base64 of an ASN.1
// DER ECDSA signature (or an RSA PKCS#1 v1.5 signature) over the file's SHA-256, which is what
// `cosign verify-blob --key PUB --signature FILE` checks (sigstore's LoadVerifier with
// crypto.SHA256 for ECDSA and RSA keys).
func SignFile(key *Key, path string) (string, error) {
	sumHex, _, err := digest.SHA256(path)
	if err != nil {
		return "", err
	}
	sum, _ := hex.DecodeString(sumHex)
	var sig []byte
	switch k := key.Signer.(type) {
	case *ecdsa.PrivateKey:
		sig, err = ecdsa.SignASN1(rand.Reader, k, sum)
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum)
	default:
		err = fmt.Errorf("unsupported key %T", k)
	}
	if err != nil {
		return "", fmt.Errorf("signing with %s: %w", key.Path, err)
	}
	out := path + SigSuffix
	if err := atomicfile.WriteFile(out, []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
		return "", fmt.Errorf("writing the signature %s: %w", out, err)
	}
	return out, nil
}

// ErrBadSignature is a signature that does not verify with the key.
var ErrBadSignature = errors.New("signature does not verify")

// VerifyFile checks the detached signature sigPath of the file at path with pub, as cosign
// verify-blob does.
func VerifyFile(pub crypto.PublicKey, path, sigPath string) error {
	raw, err := os.ReadFile(sigPath)
	if err != nil {
		return fmt.Errorf("reading the signature: %w", err)
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil {
		return fmt.Errorf("%s is not a base64 signature: %w", sigPath, err)
	}
	sumHex, _, err := digest.SHA256(path)
	if err != nil {
		return err
	}
	sum, _ := hex.DecodeString(sumHex)
	ok := false
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, sum, sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, sum, sig) == nil
	default:
		return errs.Invalidf("a %T key cannot verify these signatures: use the ECDSA or RSA public key of --sign-key", pub)
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}
