package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// errBadSignature is wrapped by every verification failure, so callers can tell it from I/O errors.
var errBadSignature = errors.New("OpenPGP verification failed")

// clockSkew tolerates a signer's clock slightly ahead of ours.
const clockSkew = 10 * time.Minute

// Signature describes a verified signature.
type Signature struct {
	KeyID       string    `json:"keyId"`       // the (sub)key that signed, hex
	Fingerprint string    `json:"fingerprint"` // of the primary key
	Created     time.Time `json:"created"`
}

// Clearsigned verifies a clear-signed message against kr and returns its text.
//
// Validity is judged at the signature's creation time: a signature made while its subkey was
// valid stays valid after that subkey expires (pinned old releases keep verifying), and a subkey
// created after the signature cannot have made it. Independently of that, a revoked primary key
// or subkey is rejected whenever the revocation is dated, and the signature itself must not have
// expired by now nor be dated in the future.
func Clearsigned(armored []byte, kr *Keyring, now time.Time) ([]byte, *Signature, error) {
	block, _ := clearsign.Decode(armored)
	if block == nil {
		return nil, nil, fmt.Errorf("%w: not a clear-signed OpenPGP message", errBadSignature)
	}
	sigBytes, err := io.ReadAll(block.ArmoredSignature.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: unreadable signature block: %v", errBadSignature, err)
	}
	sig, err := signatureFor(sigBytes, kr)
	if err != nil {
		return nil, nil, err
	}
	if sig.CreationTime.After(now.Add(clockSkew)) {
		return nil, nil, fmt.Errorf("%w: the signature is dated %s, in the future", errBadSignature, stamp(sig.CreationTime))
	}
	if sig.SigExpired(now) {
		return nil, nil, fmt.Errorf("%w: the signature expired on %s", errBadSignature,
			stamp(sig.CreationTime.Add(time.Duration(*sig.SigLifetimeSecs)*time.Second)))
	}
	atSigning := &packet.Config{Time: func() time.Time { return sig.CreationTime }}
	_, signer, err := openpgp.VerifyDetachedSignature(kr.Entities, bytes.NewReader(block.Bytes), bytes.NewReader(sigBytes), atSigning)
	if err != nil {
		return nil, nil, explain(err, sig)
	}
	for _, k := range kr.Entities.KeysById(*sig.IssuerKeyId) {
		if k.Revoked(now) || k.Entity.Revoked(now) {
			return nil, nil, fmt.Errorf("%w: signing key %X has been revoked", errBadSignature, *sig.IssuerKeyId)
		}
	}
	return block.Plaintext, &Signature{
		KeyID:       fmt.Sprintf("%016X", *sig.IssuerKeyId),
		Fingerprint: fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint),
		Created:     sig.CreationTime,
	}, nil
}

// signatureFor returns the first signature packet whose issuer is in kr, as go-crypto picks it.
func signatureFor(sigBytes []byte, kr *Keyring) (*packet.Signature, error) {
	var issuers []string
	r := packet.NewReader(bytes.NewReader(sigBytes))
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: malformed signature: %v", errBadSignature, err)
		}
		sig, ok := p.(*packet.Signature)
		if !ok || sig.IssuerKeyId == nil {
			continue
		}
		if len(kr.Entities.KeysByIdUsage(*sig.IssuerKeyId, packet.KeyFlagSign)) > 0 {
			return sig, nil
		}
		issuers = append(issuers, fmt.Sprintf("%016X", *sig.IssuerKeyId))
	}
	if len(issuers) == 0 {
		return nil, fmt.Errorf("%w: the message carries no signature", errBadSignature)
	}
	return nil, fmt.Errorf("%w: signed by key %s, which is not in the %s", errBadSignature,
		strings.Join(issuers, ", "), kr.Source)
}

func explain(err error, sig *packet.Signature) error {
	at := stamp(sig.CreationTime)
	switch {
	case errors.Is(err, pgperrors.ErrKeyExpired):
		return fmt.Errorf("%w: key %X was expired (or not yet valid) when the signature was made on %s", errBadSignature, *sig.IssuerKeyId, at)
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return fmt.Errorf("%w: signing key %X has been revoked", errBadSignature, *sig.IssuerKeyId)
	case errors.Is(err, pgperrors.ErrSignatureExpired):
		return fmt.Errorf("%w: a binding signature of key %X was expired on %s", errBadSignature, *sig.IssuerKeyId, at)
	}
	return fmt.Errorf("%w: %v (the signed text was altered or the signature is damaged)", errBadSignature, err)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
