package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// --ca-file (or FLATCAR_CAPO_CA_FILE) is trusted by every download of the build host: a release
// server over HTTPS with a private CA fails without it, with an error naming the flag (not a
// retry loop), and works with it for `release` and a whole `fetch`; a bad file is exit 2.
func TestCAFileTrustsPrivateServers(t *testing.T) {
	w := fetchtest.NewWorld(t)
	srv, ca := fetchtest.NewTLSServer(t)
	srv.Publish(t, w.Cur)
	server := srv.URL + "/{channel}"
	r := testutil.Run(t, "release", "--release-server", server, "--retries", "2").MustFail(t, 1, "is not trusted", "--ca-file FILE", "SSL_CERT_FILE")
	if n := len(srv.Requests("version.txt")); n != 0 {
		t.Errorf("the server answered %d requests over an untrusted TLS connection", n)
	}
	if strings.Contains(r.Stderr, "retrying") || strings.Contains(r.Stderr, "attempt") {
		t.Errorf("an untrusted certificate was retried:\n%s", r.Stderr)
	}
	testutil.Run(t, "release", "--release-server", server, "--ca-file", ca).MustSucceed(t)
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"release", "--release-server", server}, Env: []string{"FLATCAR_CAPO_CA_FILE=" + ca}}).MustSucceed(t)
	out := t.TempDir()
	testutil.RunCmd(t, testutil.Cmd{Args: []string{"fetch", "--release-server", server, "--ca-file", ca, "--keyring", w.Keyring,
		"--cache-dir", filepath.Join(out, "cache"), "--quiet"}, Dir: out}).MustSucceed(t)
	if len(srv.Requests(".bz2")) == 0 && len(srv.Requests(".img")) == 0 {
		t.Errorf("fetch downloaded no image over the trusted connection: %+v", srv.Requests(""))
	}
	testutil.Run(t, "release", "--release-server", server, "--ca-file", "/etc/hostname").MustFail(t, 2, "--ca-file", "no PEM certificate")
	testutil.Run(t, "release", "--release-server", server, "--ca-file", filepath.Join(out, "missing.pem")).MustFail(t, 2, "--ca-file")
}
