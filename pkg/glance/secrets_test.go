package glance_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// TestNoSecretInKeystoneErrors: a Keystone (or proxy) that answers with something else than a
// token. One that echoes the request (the password with it) and one that sends a 200 KiB HTML
// page: the message says the status with a short excerpt, the password, the application
// credential secret and the URL's userinfo never appear, -o json carries the error object.
// A clouds.yaml with one malformed cloud: that cloud's error names it and the field, never the
// value; the other clouds of the file still work.
func TestNoSecretInKeystoneErrors(t *testing.T) {
	const pw, appSecret, urlPw = "Pa55-echoed-w0rd", "app-s3cret-echoed", "url-pw-9z8y"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s %s\nAuthorization: %s\n\n%s", r.Method, r.URL, r.Header.Get("Authorization"), b)
	}))
	defer echo.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<!DOCTYPE html><html><head><title>Proxy Error</title><style>p{color:red}</style></head><body>")
		for range 4000 {
			fmt.Fprint(w, "<p>The proxy server could not handle the request.</p>")
		}
		fmt.Fprint(w, "</body></html>")
	}))
	defer html.Close()
	userinfo := func(u string) string { return strings.Replace(u, "http://", "http://admin:"+urlPw+"@", 1) }
	dir := t.TempDir()
	clouds := filepath.Join(dir, "clouds.yaml")
	doc := fmt.Sprintf(`clouds:
  echo:
    auth:
      auth_url: %s/v3
      username: admin
      password: %s
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
  appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: %s/v3
      application_credential_id: abc
      application_credential_secret: %s
  proxy:
    auth:
      auth_url: %s/v3
      username: admin
      password: %s
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
  broken:
    auth: %s
    region_name: [not, a, string]
`, userinfo(echo.URL), pw, echo.URL, appSecret, html.URL, pw, pw)
	if err := os.WriteFile(clouds, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	img := rawImage(t, dir, 3, 1<<20)
	run := func(args ...string) testutil.Result {
		t.Helper()
		r := testutil.RunCmd(t, testutil.Cmd{Args: append([]string{"upload", img, "--name", "x"}, args...),
			Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}})
		for _, s := range []string{pw, appSecret, urlPw} {
			if strings.Contains(r.Combined(), s) {
				t.Errorf("upload %v shows the secret %q:\n%s", args, s, r.Combined())
			}
		}
		return r
	}
	r := run("--cloud", "echo", "-o", "json").MustFail(t, 1, "HTTP 500", "POST /v3/auth/tokens", `"error":`, `"exitCode": 1`)
	if len(r.Stderr) > 2000 {
		t.Errorf("the echoed body is not bounded (%d bytes of stderr):\n%s", len(r.Stderr), r.Stderr)
	}
	run("--cloud", "appcred").MustFail(t, 1, "HTTP 500")
	r = run("--cloud", "proxy").MustFail(t, 1, "HTTP 502", "an HTML page: Proxy Error", "bytes in all")
	if len(r.Stderr) > 1000 || strings.Contains(r.Stderr, "<p>") {
		t.Errorf("the HTML page is printed, not an excerpt (%d bytes):\n%s", len(r.Stderr), r.Stderr)
	}
	run("--cloud", "broken").MustFail(t, 2, `cloud "broken"`, "field auth (line", "field region_name (line", "cannot be a string", "value is not shown")
	// The malformed entry is not in the way of the others: echo gets as far as its Keystone.
	run("--cloud", "echo").MustFail(t, 1, "HTTP 500")
}
