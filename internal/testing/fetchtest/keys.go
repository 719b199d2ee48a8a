// Package fetchtest builds what fetch tests need: OpenPGP keys made like Flatcar's (a primary key
// with rotating signing subkeys), a signed release tree, and a release server on 127.0.0.1 with
// hooks to count requests, record Range headers, cut connections and answer errors.
package fetchtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

const year = 365 * 24 * time.Hour

// Key is a primary key with signing subkeys in the states a verifier must tell apart.
type Key struct {
	Entity  *openpgp.Entity
	Expired *openpgp.Subkey // created 3 years ago, valid for 1 year
	Current *openpgp.Subkey // created 1 year ago, valid for 2 years
	Revoked *openpgp.Subkey // created 1 year ago, revoked ("retired") yesterday
}

func cfg(at time.Time, lifetime time.Duration) *packet.Config {
	return &packet.Config{
		Algorithm:       packet.PubKeyAlgoEdDSA,
		Time:            func() time.Time { return at },
		KeyLifetimeSecs: uint32(lifetime / time.Second),
	}
}

// NewKey generates a key whose primary was created three years before now.
func NewKey(t testing.TB, name string, now time.Time) *Key {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", "test@example.invalid", cfg(now.Add(-3*year), 0))
	if err != nil {
		t.Fatal(err)
	}
	add := func(at time.Time, life time.Duration) *openpgp.Subkey {
		if err := e.AddSigningSubkey(cfg(at, life)); err != nil {
			t.Fatal(err)
		}
		return &e.Subkeys[len(e.Subkeys)-1]
	}
	k := &Key{Entity: e}
	add(now.Add(-3*year), year)
	add(now.Add(-year), 2*year)
	add(now.Add(-year), 2*year)
	// Take the pointers after the last append: the slice may have moved.
	n := len(e.Subkeys)
	k.Expired, k.Current, k.Revoked = &e.Subkeys[n-3], &e.Subkeys[n-2], &e.Subkeys[n-1]
	if err := e.RevokeSubkey(k.Revoked, packet.KeyRetired, "retired", cfg(now.Add(-24*time.Hour), 0)); err != nil {
		t.Fatal(err)
	}
	return k
}

// PublicArmored is the public keyring, armored, as a user would pass with --keyring.
func (k *Key) PublicArmored(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Entity.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return buf.Bytes()
}

// PublicBinary is the public keyring without armor.
func (k *Key) PublicBinary(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := k.Entity.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ClearSign signs text with subkey at time at; lifetime > 0 makes the signature expire.
func ClearSign(t testing.TB, text []byte, subkey *openpgp.Subkey, at time.Time, lifetime time.Duration) []byte {
	t.Helper()
	c := &packet.Config{Time: func() time.Time { return at }, SigLifetimeSecs: uint32(lifetime / time.Second)}
	var buf bytes.Buffer
	w, err := clearsign.Encode(&buf, subkey.PrivateKey, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// DetachSign makes the binary detached .sig of data, as the release server publishes it.
func (k *Key) DetachSign(t testing.TB, data []byte, at time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := openpgp.DetachSign(&buf, k.Entity, bytes.NewReader(data), &packet.Config{Time: func() time.Time { return at }}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
