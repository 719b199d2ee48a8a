package redact

import (
	"bytes"
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
