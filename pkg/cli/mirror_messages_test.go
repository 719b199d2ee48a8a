package cli_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// What a configured mirror's failure is told: a 500 is a server error of that mirror (not "is
// the version right"), a dropped connection names the mirror that dropped it (not
// "air-gapped?", which is the hint when no mirror is configured), a 404 asks about the version.
func TestConfiguredMirrorFailuresAreToldApart(t *testing.T) {
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    []string
		notWant []string
	}{
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			[]string{"500", "a server error of --kubernetes-mirror http://127.0.0.1", "not a missing file"},
			[]string{"is the version right", "air-gapped"}},
		{"dropped connection", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, []string{"--kubernetes-mirror http://127.0.0.1", "could not be reached or dropped the connection"},
			[]string{"air-gapped", "is the version right"}},
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			[]string{"404", "is the version right, and does --kubernetes-mirror http://127.0.0.1"},
			[]string{"air-gapped", "server error"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			dir := t.TempDir()
			r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"sysext", "create", "--kubernetes-version", "v1.33.4",
				"--kubernetes-mirror", srv.URL, "--github-mirror", srv.URL, "--retries", "0",
				"--cache-dir", filepath.Join(dir, "cache"), "--output-file", filepath.Join(dir, "k.raw")}})
			r.MustFail(t, 1, c.want...)
			for _, nw := range c.notWant {
				if strings.Contains(r.Stderr, nw) {
					t.Errorf("stderr says %q:\n%s", nw, r.Stderr)
				}
			}
		})
	}
}
