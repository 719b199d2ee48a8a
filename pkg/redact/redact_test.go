package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:hunter2@mirror.example/x":          "http://REDACTED@mirror.example/x",
		"https://ghp_TOKEN@github.example/{channel}": "https://REDACTED@github.example/{channel}",
		"https://mirror.example/x?token=abc&a=1":     "https://mirror.example/x?token=REDACTED&a=1",
		"https://mirror.example/plain":               "https://mirror.example/plain",
		"/local/file.raw":                            "/local/file.raw",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestString(t *testing.T) {
	in := `Get "http://u:hunter2@127.0.0.1:1/x": refused; body {"auth":{"identity":{"methods":["password"],` +
		`"password":{"user":{"name":"admin","password":"s3cr3t-pw"}}},"application_credential":{"secret":"appsecret"}}} ` +
		`X-Auth-Token: gAAAAtoken1 password=plain1 Authorization: Bearer abc.def`
	got := String(in)
	for _, secret := range []string{"hunter2", "s3cr3t-pw", "appsecret", "gAAAAtoken1", "plain1", "abc.def"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q survives in %s", secret, got)
		}
	}
	for _, kept := range []string{"127.0.0.1:1/x", `"name":"admin"`, "methods"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q lost from %s", kept, got)
		}
	}
}

func TestSecretLiteral(t *testing.T) {
	SecretsOfURL("http://me:Lit3ralPw@host/")
	if got := String("the mirror said Lit3ralPw was wrong"); strings.Contains(got, "Lit3ralPw") {
		t.Fatal(got)
	}
}

func TestExcerptHTML(t *testing.T) {
	page := "<!DOCTYPE html><html><head><title>Corporate Proxy</title><style>b{}</style></head><body>" +
		strings.Repeat("<p>blah blah</p>", 10000) + "</body></html>"
	got := Excerpt([]byte(page), 200)
	if len(got) > 260 || !strings.HasPrefix(got, "an HTML page: Corporate Proxy") || strings.Contains(got, "<") {
		t.Fatalf("excerpt %q", got)
	}
}

func TestWriterKeepsFd(t *testing.T) {
	var b bytes.Buffer
	w := Writer(&b)
	w.Write([]byte("GET http://a:bpassword@h/ failed\n"))
	if strings.Contains(b.String(), "bpassword") {
		t.Fatal(b.String())
	}
}

// The writers mask credentials only: a manifest or a report may hold secret-named fields.
func TestKnownLeavesSecretNamesAlone(t *testing.T) {
	in := "identityRef:\n  secretName: cluster-cloud-config\n  token: ${TOKEN}\nurl: https://u:pw1234@h/"
	want := "identityRef:\n  secretName: cluster-cloud-config\n  token: ${TOKEN}\nurl: https://REDACTED@h/"
	if got := Known(in); got != want {
		t.Fatalf("Known:\n%s\nwant\n%s", got, want)
	}
}

// A registered secret is masked in every encoding a server may echo it in, alone or inside a
// longer encoded text, and nothing around it is touched.
func TestSecretEncodings(t *testing.T) {
	const pw = `Pa55/wo+rd&"x y?`
	Secret(pw)
	for name, echo := range map[string]string{
		"plain":         pw,
		"base64":        base64.StdEncoding.EncodeToString([]byte(pw)),
		"base64 url":    base64.URLEncoding.EncodeToString([]byte(pw)),
		"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(pw)),
		"query":         url.QueryEscape(pw),
		"path":          url.PathEscape(pw),
		"json":          strings.Trim(mustJSON(t, pw), `"`),
		"basic header":  base64.StdEncoding.EncodeToString([]byte("admin:" + pw)),
		"docker auth 1": base64.StdEncoding.EncodeToString([]byte("u:" + pw)),
		"docker auth 2": base64.URLEncoding.EncodeToString([]byte("user1:" + pw + ":tail")),
	} {
		for _, f := range []func(string) string{String, Known} {
			in := "authentication failed: the server echoed [" + echo + "] for the user admin"
			got := f(in)
			if !strings.HasPrefix(got, "authentication failed: the server echoed [") || !strings.HasSuffix(got, "] for the user admin") {
				t.Errorf("%s: neighbouring words changed: %q", name, got)
			}
			if !strings.Contains(got, mask) {
				t.Errorf("%s: %q survives in %q", name, echo, got)
			}
		}
	}
}

// Only the value of a key that names a secret is masked: a cloud called "badpass" followed by
// prose keeps its words.
func TestStringLeavesProseAfterSecretishNames(t *testing.T) {
	for in, want := range map[string]string{
		"cloud badpass: authenticating at http://127.0.0.1:5000/v3: HTTP 401": "cloud badpass: authenticating at http://127.0.0.1:5000/v3: HTTP 401",
		"bypass: authentication is off":                                       "bypass: authentication is off",
		"OS_PASSWORD=hunter22 ok":                                             "OS_PASSWORD=REDACTED ok",
		"X-Auth-Token: gAAAAB ok":                                             "X-Auth-Token: REDACTED ok",
		`{"clientSecret": "abc12345", "name": "n"}`:                           `{"clientSecret": "REDACTED", "name": "n"}`,
		`{"passage": "abc12345"}`:                                             `{"passage": "abc12345"}`,
		"api_key=k1234 apiKey: k5678":                                         "api_key=REDACTED apiKey: REDACTED",
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustJSON(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
