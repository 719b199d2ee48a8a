package verify_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
	"github.com/flatcar-capo/flatcar-capo/pkg/keys"
)

const text = "# SHA512 HASH\nabc  flatcar_production_qemu_image.img\n"

func TestClearsigned(t *testing.T) {
	now := time.Now()
	k := fetchtest.NewKey(t, "Test Buildbot", now)
	other := fetchtest.NewKey(t, "Somebody Else", now)
	kr := keyringOf(t, k)
	tests := []struct {
		name   string
		signed []byte
		want   string // "" means valid
	}{
		{"current subkey", fetchtest.ClearSign(t, []byte(text), k.Current, now.Add(-time.Hour), 0), ""},
		{"expired subkey, signed while valid", fetchtest.ClearSign(t, []byte(text), k.Expired, now.Add(-30*30*24*time.Hour), 0), ""},
		{"expired subkey, signed after expiry", fetchtest.ClearSign(t, []byte(text), k.Expired, now.Add(-24*time.Hour), 0), "expired (or not yet valid)"},
		{"subkey used before it existed", fetchtest.ClearSign(t, []byte(text), k.Current, now.Add(-2*365*24*time.Hour), 0), "not yet valid"},
		{"revoked subkey", fetchtest.ClearSign(t, []byte(text), k.Revoked, now.Add(-48*time.Hour), 0), "revoked"},
		{"another key", fetchtest.ClearSign(t, []byte(text), other.Current, now.Add(-time.Hour), 0), "not in the test keyring"},
		{"expired signature", fetchtest.ClearSign(t, []byte(text), k.Current, now.Add(-2*time.Hour), time.Hour), "signature expired on"},
		{"signature from the future", fetchtest.ClearSign(t, []byte(text), k.Current, now.Add(24*time.Hour), 0), "in the future"},
		{"altered text", bytes.Replace(fetchtest.ClearSign(t, []byte(text), k.Current, now.Add(-time.Hour), 0), []byte("abc"), []byte("abd"), 1), "altered"},
		{"not signed", []byte(text), "not a clear-signed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, sig, err := verify.Clearsigned(tc.signed, kr, now)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected a valid signature: %v", err)
				}
				if string(got) != text || sig.Fingerprint == "" {
					t.Fatalf("text %q, signature %+v", got, sig)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func keyringOf(t *testing.T, k *fetchtest.Key) *verify.Keyring {
	t.Helper()
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(k.PublicArmored(t)))
	if err != nil {
		t.Fatal(err)
	}
	return &verify.Keyring{Entities: el, Source: "test keyring"}
}

func TestLoadKeyringArmoredAndBinary(t *testing.T) {
	now := time.Now()
	k := fetchtest.NewKey(t, "Test Buildbot", now)
	signed := fetchtest.ClearSign(t, []byte(text), k.Current, now, 0)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"armored.asc": k.PublicArmored(t), "binary.gpg": k.PublicBinary(t)} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, data, 0o600)
		kr, err := verify.LoadKeyring(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, _, err := verify.Clearsigned(signed, kr, now); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	if _, err := verify.LoadKeyring(bad); err == nil || !strings.Contains(err.Error(), "neither an armored nor a binary") {
		t.Fatalf("garbage keyring: %v", err)
	}
	if _, err := verify.LoadKeyring(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing keyring accepted")
	}
}

// The embedded key is Flatcar's: the pinned primary, with the subkey that signs releases until
// 2027-03-08 usable for signing.
func TestEmbeddedFlatcarKey(t *testing.T) {
	kr, err := verify.EmbeddedKeyring()
	if err != nil {
		t.Fatal(err)
	}
	if len(kr.Entities) != 1 {
		t.Fatalf("%d keys embedded, want 1", len(kr.Entities))
	}
	e := kr.Entities[0]
	if got := strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint)); got != keys.FlatcarFingerprint {
		t.Fatalf("embedded primary %s, want %s", got, keys.FlatcarFingerprint)
	}
	newest := e.Subkeys[len(e.Subkeys)-1]
	expiry := newest.PublicKey.CreationTime.Add(time.Duration(*newest.Sig.KeyLifetimeSecs) * time.Second)
	if !newest.Sig.FlagSign || expiry.Format("2006-01-02") != "2027-03-08" {
		t.Fatalf("newest subkey sign=%v expires %s, want a signing subkey expiring 2027-03-08", newest.Sig.FlagSign, expiry)
	}
	if len(kr.Entities.KeysByIdUsage(newest.PublicKey.KeyId, 0x02)) != 1 {
		t.Fatal("newest subkey not usable for signing")
	}
}
