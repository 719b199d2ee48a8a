package sysext

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// signatureFile is what systemd-sysupdate fetches next to SHA256SUMS when a transfer says
// Verify=true: a detached OpenPGP signature of SHA256SUMS, checked with gpg against
// ImportPubring.
const signatureFile = "SHA256SUMS.gpg"

// ImportPubring is where systemd-sysupdate (systemd's import/pull-common.c) takes the keyring
// from: /etc/systemd/import-pubring.gpg when it exists, else the vendor /usr/lib/systemd one;
// systemd 257+ still reads this legacy name after import-pubring.pgp.
const ImportPubring = "/etc/systemd/import-pubring.gpg"

// readKey reads an armored or binary OpenPGP key file holding one key.
func readKey(flag, path string) (*openpgp.Entity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Invalidf("%s: %v", flag, err)
	}
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	if err != nil {
		el, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN ")) && !bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN PGP")) {
		return nil, errs.Invalidf("%s %s is a PEM key or certificate (as Glance and cosign signing use), not OpenPGP: systemd-sysupdate verifies SHA256SUMS.gpg with gpg, so give an OpenPGP key (gpg --export[-secret-keys] --armor KEYID); $FLATCAR_CAPO_SIGN_KEY, if set for build, applies here too", flag, path)
	}
	if err == nil && len(el) == 0 {
		err = errors.New("no key in it") // not "<nil>"
	}
	if err != nil {
		return nil, errs.Invalidf("%s %s is not an OpenPGP key (armored or binary, as gpg --export[-secret-keys] writes it): %v", flag, path, err)
	}
	if len(el) > 1 {
		return nil, errs.Invalidf("%s %s holds %d keys; export just the one: gpg --export[-secret-keys] KEYID", flag, path, len(el))
	}
	return el[0], nil
}

// loadSigningKey reads --sign-key: one unprotected OpenPGP private key that can sign now.
func loadSigningKey(path string) (*openpgp.Entity, error) {
	e, err := readKey("--sign-key", path)
	if err != nil {
		return nil, err
	}
	if e.PrivateKey == nil {
		return nil, errs.Invalidf("--sign-key %s is a public key; give the private key: gpg --export-secret-keys --armor KEYID", path)
	}
	sk, ok := e.SigningKey(time.Now())
	if !ok {
		return nil, errs.Invalidf("--sign-key %s (%X) has no signing key valid now (expired or revoked?); extend it (gpg --quick-set-expire) or use another", path, e.PrimaryKey.Fingerprint)
	}
	if e.PrivateKey.Encrypted || sk.PrivateKey != nil && sk.PrivateKey.Encrypted {
		return nil, errs.Invalidf("--sign-key %s is passphrase-protected; give the signing job an unprotected export (gpg --export-secret-keys with an empty passphrase, stored 0600)", path)
	}
	return e, nil
}

// signDetached is a binary detached signature of data (SHA-256), what gpg --detach-sign writes.
func signDetached(e *openpgp.Entity, data []byte) ([]byte, error) {
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, e, bytes.NewReader(data), &packet.Config{DefaultHash: crypto.SHA256}); err != nil {
		return nil, fmt.Errorf("signing SHA256SUMS: %w", err)
	}
	return sig.Bytes(), nil
}

// PublicKeyring reads --sysupdate-key (a public key, armored or binary) and returns it as the
// binary keyring gpg --keyring reads (an armored file is not a keyring to gpg).
func PublicKeyring(path string) ([]byte, error) {
	e, err := readKey("--sysupdate-key", path)
	if err != nil {
		return nil, err
	}
	if e.PrivateKey != nil {
		return nil, errs.Invalidf("--sysupdate-key %s holds a private key, which must not go onto nodes; give the public key: gpg --export KEYID > sysupdate.pub", path)
	}
	var b bytes.Buffer
	if err := e.Serialize(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
