package verify_test

import (
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/fetch/verify"
)

// A DIGESTS.asc comes from the network: no input may panic the verifier or pass as signed.
func FuzzClearsigned(f *testing.F) {
	kr, err := verify.EmbeddedKeyring()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nabc\n-----BEGIN PGP SIGNATURE-----\n\nwsBcBAEBCgAQBQJ=\n-----END PGP SIGNATURE-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := verify.Clearsigned(b, kr, time.Now()); err == nil {
			t.Fatalf("random input verified against Flatcar's key: %q", b)
		}
	})
}
