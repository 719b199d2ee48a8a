package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// The image properties Glance (glance/location.py) and Nova read, named as cursive names them.
const (
	PropSignature  = "img_signature"
	PropHashMethod = "img_signature_hash_method"
	PropKeyType    = "img_signature_key_type"
	PropCertUUID   = "img_signature_certificate_uuid"
)

// GlanceHash is the hash method of the image signature: SHA-512, the hash every upload already
// computes (build records it), so signing reads the image no extra time.
const GlanceHash = "SHA-512"

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
		PropHashMethod: GlanceHash,
		PropKeyType:    keyType,
		PropCertUUID:   certUUID,
	}, nil
}
