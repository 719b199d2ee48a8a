package glance_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// A Keystone that answers 401 with the password echoed in every encoding (base64 standard and
// URL, URL query and path escaping, JSON escaping, inside a Basic header's base64): none of them
// reaches stderr or the -o json error, and the words around them survive (the cloud is called
// "badpass", the message says "authentication at"; the redactor used to mask that word).
func TestEncodedPasswordEchoIsMasked(t *testing.T) {
	const pw = `Echo+me/"pl ease"?&`
	b64 := base64.StdEncoding.EncodeToString
	jsonPw, _ := json.Marshal(pw)
	echoes := []string{
		b64([]byte(pw)), base64.URLEncoding.EncodeToString([]byte(pw)), base64.RawURLEncoding.EncodeToString([]byte(pw)),
		url.QueryEscape(pw), url.PathEscape(pw), strings.Trim(string(jsonPw), `"`), b64([]byte("admin:" + pw)),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"code": 401, "title": "Unauthorized", "message": "authentication failed for %s"}}`, strings.Join(echoes, " | "))
	}))
	defer srv.Close()
	dir := t.TempDir()
	clouds := filepath.Join(dir, "clouds.yaml")
	doc := fmt.Sprintf(`clouds:
  badpass:
    auth:
      auth_url: %s/v3
      username: admin
      password: '%s'
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
`, srv.URL, pw)
	if err := os.WriteFile(clouds, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	img := rawImage(t, dir, 3, 1<<20)
	for _, format := range []string{"text", "json"} {
		r := testutil.RunCmd(t, testutil.Cmd{Args: []string{"upload", img, "--name", "x", "--cloud", "badpass", "-o", format},
			Env: []string{"OS_CLIENT_CONFIG_FILE=" + clouds}})
		r.MustFail(t, 1, "cloud badpass: authentication at", "was refused (HTTP 401)", "the server said:", "authentication failed for")
		for _, e := range append(echoes, pw) {
			if strings.Contains(r.Combined(), e) {
				t.Errorf("-o %s shows the password encoded as %q:\n%s", format, e, r.Combined())
			}
		}
	}
}
