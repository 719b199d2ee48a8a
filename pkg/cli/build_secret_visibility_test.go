package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// An image built with registry logins or a proxy password holds them: build refuses to upload
// it public or community (it used to warn and go on), before any download.
func TestBuildRefusesSecretsInAPublicImage(t *testing.T) {
	for _, c := range []struct {
		args []string
		kind string
	}{
		{[]string{"--node-registry-auth", "--visibility", "public"}, "registry logins"},
		{[]string{"--http-proxy", "http://user:hunter22@proxy.example:3128", "--visibility", "community"}, "a proxy password"},
	} {
		args := append([]string{"build", "--cloud", "somewhere", "--output-dir", t.TempDir()}, c.args...)
		r := testutil.RunCmd(t, testutil.Cmd{Args: args, Dir: t.TempDir(), Timeout: time.Minute})
		r.MustFail(t, 2, c.kind, "--visibility private or shared")
		if strings.Contains(r.Combined(), "hunter22") {
			t.Errorf("the proxy password is in the output:\n%s", r.Combined())
		}
	}
}
