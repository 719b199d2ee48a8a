// Package verify checks Flatcar's clear-signed DIGESTS files with OpenPGP (ProtonMail/go-crypto)
// and streams SHA512 digests.
package verify

import (
	"bytes"
	"fmt"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/keys"
)

// Keyring holds the public keys a DIGESTS signature may come from.
type Keyring struct {
	Entities openpgp.EntityList
	Source   string // "embedded Flatcar image signing key" or the file it came from
}

// EmbeddedKeyring is Flatcar's image signing key built into the binary.
func EmbeddedKeyring() (*Keyring, error) {
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(keys.FlatcarImageSigning))
	if err != nil {
		return nil, fmt.Errorf("embedded Flatcar signing key is unreadable: %w", err)
	}
	return &Keyring{Entities: el, Source: "embedded Flatcar image signing key " + keys.FlatcarFingerprint}, nil
}

// LoadKeyring reads an armored or binary public keyring from path; it replaces the embedded key.
// Its errors wrap errs.ErrInvalid: the file is the caller's input.
func LoadKeyring(path string) (*Keyring, error) {
	b, err := infile.ReadFile("--keyring", path, infile.Keyring)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	if err != nil {
		el, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return nil, errs.Invalidf("keyring %s is neither an armored nor a binary OpenPGP public key: %w", path, err)
	}
	if len(el) == 0 {
		return nil, errs.Invalidf("keyring %s holds no key", path)
	}
	return &Keyring{Entities: el, Source: "keyring " + path}, nil
}

// KeyringInForce is the keyring --keyring and --insecure-skip-verify give: path's (it
// replaces the embedded Flatcar key), else the embedded one; nil when insecure.
func KeyringInForce(path string, insecure bool) (*Keyring, error) {
	if insecure {
		return nil, nil
	}
	var k *Keyring
	var err error
	if path != "" {
		k, err = LoadKeyring(path)
	} else {
		k, err = EmbeddedKeyring()
	}
	if err != nil {
		return nil, fmt.Errorf("--keyring: %w", err)
	}
	return k, nil
}
