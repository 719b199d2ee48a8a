package glance_test

import (
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/signingtest"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// --sign-cert-uuid is Barbican's secret UUID: anything else (a name, a path, a URL with
// "../" in it) is refused before any request (exit 2), not sent to Barbican.
func TestSignCertUUIDMustBeAUUID(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	dir := t.TempDir()
	key, _ := signingtest.Key(t, dir, "key.pem", signingtest.P384)
	file := rawImage(t, dir, 54, 1<<20)
	for _, bad := range []string{"my-cert", "../../v1/secrets", "0c3e6a5b-5f41-4b9a-9d2b-3f1f6a7b8c9", "{0c3e6a5b-5f41-4b9a-9d2b-3f1f6a7b8c9d}"} {
		uploadCLI(t, file, "flatcar", glance.Reuse, "--sign-key", key, "--sign-cert-uuid", bad).MustFail(t, 2, "--sign-cert-uuid", "is not a UUID")
	}
	if n := f.Count("POST /v2/images"); n != 0 {
		t.Errorf("%d images created after refused --sign-cert-uuid values", n)
	}
}
