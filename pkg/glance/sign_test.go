package glance_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// glanceVerified says whether the real Glance logged a successful signature check of image id
// (glance/location.py's _verify_signature): the proof it verified rather than ignored it.
func glanceVerified(t *testing.T, id string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stack.dir, "glance-one", "glance-api.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), "Successfully verified signature for image "+id)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// A signed upload with each key type Glance supports: the real Glance verifies the signature
// (its log says so) and the image is active with the four properties; reuse and replace keep
// working, and the certificate stored in Barbican is found again rather than stored twice.
func TestSignedUploadVerifiedByGlance(t *testing.T) {
	needOpenStack(t)
	for _, kind := range []string{signingtest.P384, signingtest.P521, signingtest.RSA3072} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			key, signer := signingtest.Key(t, dir, "key.pem", kind)
			cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
			img := qcow2Image(t, dir, 31)
			name := uniqueName(t)
			res := decodeResults(t, upload(t, nil, img, "--name", name, "--cloud", "local", "--sign-key", key, "--sign-cert", cert, "-o", "json").MustSucceed(t))
			if len(res) != 1 || res[0].Action != "uploaded" {
				t.Fatalf("unexpected report %+v", res)
			}
			id := res[0].ID
			show := openstackShow(t, "local", id)
			wantType := map[string]string{signingtest.P384: "ECC_SECP384R1", signingtest.P521: "ECC_SECP521R1", signingtest.RSA3072: "RSA-PSS"}[kind]
			uuid, _ := show.Properties["img_signature_certificate_uuid"].(string)
			if show.Status != "active" || show.Properties["img_signature_key_type"] != wantType ||
				show.Properties["img_signature_hash_method"] != "SHA-512" || show.Properties["img_signature"] == nil || !uuidRE.MatchString(uuid) {
				t.Fatalf("image %s: status %s, properties %v", id, show.Status, show.Properties)
			}
			if !glanceVerified(t, id) {
				t.Fatalf("Glance's log has no successful signature verification of %s", id)
			}
			// Reuse: same content, same certificate (found in Barbican, not stored again).
			again := decodeResults(t, upload(t, nil, img, "--name", name, "--cloud", "local", "--sign-key", key, "--sign-cert", cert, "-o", "json").MustSucceed(t))
			if again[0].Action != "reused" || again[0].ID != id {
				t.Fatalf("second upload: %+v, want reused %s", again[0], id)
			}
			// The certificate's UUID works as --sign-cert-uuid; replace uploads anew, signed again.
			repl := decodeResults(t, upload(t, nil, img, "--name", name, "--cloud", "local", "--sign-key", key, "--sign-cert-uuid", uuid, "--on-exists", "replace", "-o", "json").MustSucceed(t))
			if repl[0].Action != "replaced" || repl[0].ID == id || repl[0].Properties["img_signature_certificate_uuid"] != uuid {
				t.Fatalf("replace: %+v", repl[0])
			}
			if !glanceVerified(t, repl[0].ID) {
				t.Fatalf("Glance's log has no successful signature verification of the replacement %s", repl[0].ID)
			}
			assertOnlyActive(t, "local", name, 1)
		})
	}
}

// An unsigned image of the same content is not reused when a signed one is asked for.
func TestSignedUploadDoesNotReuseUnsigned(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	img := qcow2Image(t, dir, 32)
	name := uniqueName(t)
	upload(t, nil, img, "--name", name, "--cloud", "local").MustSucceed(t)
	upload(t, nil, img, "--name", name, "--cloud", "local", "--sign-key", key, "--sign-cert", cert).
		MustFail(t, 1, "same content but no image signature", "--on-exists replace")
	upload(t, nil, img, "--name", name, "--cloud", "local", "--sign-key", key, "--sign-cert", cert, "--on-exists", "replace").MustSucceed(t)
	assertOnlyActive(t, "local", name, 1)
}

// Glance itself refuses a signature of other data, and one made by a key that is not the
// certificate's (an untrusted signer); flatcar-capo says why in one line and leaves no image.
// The properties are handed in with --property, as a signature made elsewhere would be.
func TestGlanceRefusesBadSignatures(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	keyPath, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	otherPath, _ := signingtest.Key(t, dir, "other.pem", signingtest.P384)
	img := qcow2Image(t, dir, 33)
	other := rawImage(t, t.TempDir(), 34, 1<<20)

	// A good signed upload stores the certificate and tells its UUID.
	good := decodeResults(t, upload(t, nil, img, "--name", uniqueName(t), "--cloud", "local", "--sign-key", keyPath, "--sign-cert", cert, "-o", "json").MustSucceed(t))
	uuid := good[0].Properties["img_signature_certificate_uuid"]

	sign := func(keyFile, dataFile string) []string {
		key, err := signing.LoadKey(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		sumHex, _, err := digest.SHA512(dataFile)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := hex.DecodeString(sumHex)
		props, err := signing.GlanceSignature(key, sum, uuid)
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for k, v := range props {
			args = append(args, "--property", k+"="+v)
		}
		return args
	}
	for _, c := range []struct{ name, key, data string }{
		{"other-data", keyPath, other},
		{"untrusted-key", otherPath, img},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := uniqueName(t)
			r := upload(t, nil, append([]string{img, "--name", name, "--cloud", "local"}, sign(c.key, c.data)...)...).
				MustFail(t, 1, "Glance refused the image signature", "Signature verification failed")
			line := ""
			for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
				if strings.Contains(l, "Glance refused the image signature") {
					line = l
				}
			}
			t.Logf("flatcar-capo says: %s", line)
			if strings.ContainsAny(line, "<>") || len(line) > 400 {
				t.Fatalf("the refusal is not one readable line: %q", line)
			}
			if left := imagesNamed(t, "local", name); len(left) != 0 {
				t.Fatalf("a refused upload left %d image(s) named %s", len(left), name)
			}
		})
	}
}

// Bad input stops before Glance has anything: a key that is not the certificate's, an expired
// certificate, a P-256 key (cursive cannot verify it), a UUID Barbican does not have, a Barbican
// that is down.
func TestSignedUploadBadInput(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	_, otherSigner := signingtest.Key(t, dir, "other.pem", signingtest.P384)
	otherCert := signingtest.ValidCert(t, dir, "other-cert.pem", otherSigner)
	expired := signingtest.Cert(t, dir, "expired.pem", signer, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	p256, p256Signer := signingtest.Key(t, dir, "p256.pem", signingtest.P256)
	p256Cert := signingtest.ValidCert(t, dir, "p256-cert.pem", p256Signer)
	img := qcow2Image(t, dir, 35)

	// The other certificate in Barbican, for --sign-cert-uuid of a certificate that is not the key's.
	otherKey, _ := filepath.Abs(filepath.Join(dir, "other.pem"))
	stored := decodeResults(t, upload(t, nil, img, "--name", uniqueName(t), "--cloud", "local", "--sign-key", otherKey, "--sign-cert", otherCert, "-o", "json").MustSucceed(t))
	otherUUID := stored[0].Properties["img_signature_certificate_uuid"]

	for _, c := range []struct {
		name  string
		cloud string
		args  []string
		code  int
		frags []string
	}{
		{"key-not-cert", "local", []string{"--sign-key", key, "--sign-cert", otherCert}, 2, []string{"does not match the certificate"}},
		{"key-not-uuid-cert", "local", []string{"--sign-key", key, "--sign-cert-uuid", otherUUID}, 2, []string{"does not match the certificate", otherUUID}},
		{"expired", "local", []string{"--sign-key", key, "--sign-cert", expired}, 2, []string{"expired on"}},
		{"p256", "local", []string{"--sign-key", p256, "--sign-cert", p256Cert}, 2, []string{"P-384 or P-521"}},
		{"unknown-uuid", "local", []string{"--sign-key", key, "--sign-cert-uuid", "00000000-0000-4000-8000-000000000000"}, 2, []string{"has no such secret"}},
		{"no-cert", "local", []string{"--sign-key", key}, 2, []string{"--sign-cert-uuid", "--sign-cert"}},
		{"barbican-down", "local-two", []string{"--sign-key", key, "--sign-cert", cert}, 1, []string{"Barbican", "unreachable", "nothing was uploaded"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := uniqueName(t)
			upload(t, nil, append([]string{img, "--name", name, "--cloud", c.cloud}, c.args...)...).MustFail(t, c.code, c.frags...)
			if left := imagesNamed(t, c.cloud, name); len(left) != 0 {
				t.Fatalf("%d image(s) named %s were made", len(left), name)
			}
		})
	}
}

// With --disk-format qcow2 a raw file goes to Glance as a qcow2 stream made on the way: the
// signature is of those bytes, the ones Glance stores and verifies.
func TestSignedUploadOfAConvertedStream(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	key, signer := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	cert := signingtest.ValidCert(t, dir, "cert.pem", signer)
	raw := rawImage(t, dir, 36, 4<<20)
	res := decodeResults(t, upload(t, nil, raw, "--name", uniqueName(t), "--cloud", "local", "--disk-format", "qcow2",
		"--sign-key", key, "--sign-cert", cert, "-o", "json").MustSucceed(t))
	if res[0].DiskFormat != "qcow2" || res[0].Properties["img_signature"] == "" {
		t.Fatalf("unexpected result %+v", res[0])
	}
	if !glanceVerified(t, res[0].ID) {
		t.Fatalf("Glance's log has no successful signature verification of %s", res[0].ID)
	}
}
