package glance

import "testing"

// Glance's 400 page (webob) as the real Glance answers a refused signature: the line a user
// reads names the refusal once, without HTML or the repeated status line.
func TestSignatureRefusalIsOneLine(t *testing.T) {
	body := []byte("<html>\n <head>\n  <title>400 Bad Request</title>\n </head>\n <body>\n  <h1>400 Bad Request</h1>\n" +
		"  Signature verification failed for image f2b24f7b-b7a1-4ea6-822c-7a052a100abc: Signature verification failed<br /><br />\n\n\n\n </body>\n</html>")
	got := (&httpStatusError{Method: "PUT", URL: "http://g/v2/images/x/file", Status: 400, Body: body}).Error()
	want := "Glance refused the image signature (HTTP 400: Signature verification failed for image f2b24f7b-b7a1-4ea6-822c-7a052a100abc: Signature verification failed): the signature is not of these bytes, or not made by the key of the certificate in Barbican"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	other := (&httpStatusError{Method: "PUT", URL: "http://g/v2/images/x/file", Status: 413, Body: []byte("<html><title>413 Request Entity Too Large</title><h1>413 Request Entity Too Large</h1>Image exceeds the storage quota</html>")}).Error()
	if other != "PUT http://g/v2/images/x/file: Glance answered HTTP 413 Request Entity Too Large: Image exceeds the storage quota" {
		t.Fatalf("other 4xx: %q", other)
	}
}
