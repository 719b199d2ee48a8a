package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A file that is not what its argument wants is invalid input, exit 2 (inspect, oem show and
// sysext inspect said 1), and no message reads "<nil>": a check that also refused a file of the
// wrong type formatted the nil error of its stat or parse (verify DIR, an empty OpenPGP key).
func TestInvalidInputFilesExit2WithoutNil(t *testing.T) {
	dir := t.TempDir()
	notImage := filepath.Join(dir, "notes.json")
	writeFile(t, notImage, `{"not": "an image"}`)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "signing.pub")
	writeFile(t, pub, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	emptyKey := filepath.Join(dir, "empty.asc")
	writeFile(t, emptyKey, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n-----END PGP PUBLIC KEY BLOCK-----\n")
	artifactDir := filepath.Join(dir, "image.qcow2")
	if err := os.Mkdir(artifactDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"inspect", notImage}, []string{"no GPT partition table"}},
		{[]string{"oem", "show", notImage}, []string{"no GPT partition table"}},
		{[]string{"sysext", "inspect", notImage}, []string{"not a squashfs image"}},
		{[]string{"verify", artifactDir, "--key", pub}, []string{"is a directory"}},
		{[]string{"manifests", "--flavor", "sysext", "--kubernetes-version", "v1.33.4", "--insecure-no-hash",
			"--sysupdate-url", "https://mirror.example/ext", "--sysupdate-key", emptyKey}, []string{"--sysupdate-key", "not an OpenPGP key", "no key in it"}},
	} {
		r := testutil.Run(t, c.args...).MustFail(t, 2, c.want...)
		if strings.Contains(r.Stderr, "<nil>") {
			t.Errorf("%q: the message says <nil>:\n%s", c.args, r.Stderr)
		}
	}
}
