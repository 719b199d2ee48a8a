package glance_test

import (
	"os"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// An image whose build record says it carries registry logins is refused public or community
// (exit 2, naming the secret and the fix) before anything is created; private goes up.
func TestUploadRefusesSecretsInAPublicImage(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	file := rawImage(t, t.TempDir(), 55, 1<<20)
	record := `{"imageName": "flatcar", "carriesSecrets": ["registry logins (--node-registry-auth)"]}`
	if err := os.WriteFile(file+".build.json", []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"public", "community"} {
		uploadCLI(t, file, "flatcar", glance.Reuse, "--visibility", v).MustFail(t, 2, "--visibility "+v, "registry logins", "--visibility private or shared")
	}
	if n := f.Count("POST /v2/images"); n != 0 {
		t.Errorf("%d images created for refused visibilities", n)
	}
	reportedID(t, uploadCLI(t, file, "flatcar", glance.Reuse, "--visibility", "private"))
}
