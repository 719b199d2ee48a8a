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

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
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
	sumHex, _, err := digest.SHA256(path)
	if err != nil {
		return err
	}
	return VerifySHA256(pub, sumHex, sigPath)
}

// VerifySHA256 checks the detached signature sigPath with pub against a file's sha256 (hex), for
// a caller that hashed the file itself (verify hashes the image once for its sha256 and sha512).
// The signature is read through infile: a pipe or device is refused, a huge file cut off.
func VerifySHA256(pub crypto.PublicKey, sumHex, sigPath string) error {
	raw, err := infile.ReadFile("signature", sigPath, infile.Signature)
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) {
			return err
		}
		return fmt.Errorf("reading the signature: %w", err)
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil {
		return fmt.Errorf("%s is not a base64 signature: %w", sigPath, err)
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

// The image properties Glance (glance/location.py) and Nova read, named as cursive names them.
const (
	PropSignature  = "img_signature"
	propHashMethod = "img_signature_hash_method"
	propKeyType    = "img_signature_key_type"
	PropCertUUID   = "img_signature_certificate_uuid"
)

// glanceHash is the hash method of the image signature: SHA-512, the hash every upload already
// computes (build records it), so signing reads the image no extra time.
const glanceHash = "SHA-512"

// GlanceKeyType is img_signature_key_type for key, or an error for a key cursive 0.2 cannot
// verify: it registers RSA-PSS, DSA and ECC curves of 384 bits and more only (ECC_SECP384R1,
// ECC_SECP521R1, ECC_SECT409K1/R1, ECC_SECT571K1/R1); P-256, cosign's default, is not among them.
func GlanceKeyType(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return "RSA-PSS", nil
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 384 {
			return "", errs.Invalidf("a %s key cannot sign for Glance: cursive verifies ECDSA on P-384 or P-521 only (or RSA-PSS); make one with openssl ecparam -name secp384r1 -genkey", curveName(k.Curve))
		}
		return "ECC_" + curveName(k.Curve), nil
	}
	return "", errs.Invalidf("a %T cannot sign for Glance: use RSA or ECDSA P-384/P-521", pub)
}

// GlanceSignature returns the four img_signature* properties for an image whose bytes, exactly as
// Glance stores them, have the SHA-512 digest sha512Digest. cursive verifies with the
// certificate's public key over the hash of the data (cryptography's Prehashed): RSA with
// PSS(MGF1(hash), salt = PSS.MAX_LENGTH), ECDSA DER-encoded; img_signature is the base64 of it.
func GlanceSignature(key *Key, sha512Digest []byte, certUUID string) (map[string]string, error) {
	keyType, err := GlanceKeyType(key.Public())
	if err != nil {
		return nil, err
	}
	if len(sha512Digest) != 64 {
		return nil, fmt.Errorf("signing for Glance: a SHA-512 digest has 64 bytes, not %d", len(sha512Digest))
	}
	var sig []byte
	switch k := key.Signer.(type) {
	case *rsa.PrivateKey:
		// PSSSaltLengthAuto signs with the longest salt, which is what MAX_LENGTH verifies.
		sig, err = rsa.SignPSS(rand.Reader, k, crypto.SHA512, sha512Digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
	case *ecdsa.PrivateKey:
		sig, err = ecdsa.SignASN1(rand.Reader, k, sha512Digest)
	default:
		err = fmt.Errorf("unsupported key %T", k)
	}
	if err != nil {
		return nil, fmt.Errorf("signing the image with %s: %w", key.Path, err)
	}
	return map[string]string{
		PropSignature:  base64.StdEncoding.EncodeToString(sig),
		propHashMethod: glanceHash,
		propKeyType:    keyType,
		PropCertUUID:   certUUID,
	}, nil
}
