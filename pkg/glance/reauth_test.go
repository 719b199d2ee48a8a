package glance_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// A token that dies during a long run (expired or revoked) is renewed and the upload goes on.
func TestReauthenticatesWhenTheTokenDies(t *testing.T) {
	needOpenStack(t)
	ctx := context.Background()
	c, err := glance.Connect(ctx, "local") // its own client: the test revokes its token
	if err != nil {
		t.Fatal(err)
	}
	old := c.Provider.Token()
	req, _ := http.NewRequest(http.MethodDelete, stack.env["KEYSTONE_URL"]+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", old)
	req.Header.Set("X-Subject-Token", old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoking the token: %v %v", err, resp)
	}
	time.Sleep(3 * time.Second) // the test Glance caches token validations for 2 s

	file := rawImage(t, t.TempDir(), 11, 1<<20)
	meta, err := glance.BuildMetadata(glance.MetadataInput{})
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName(t)
	res, err := glance.Upload(ctx, c, &glance.Request{File: file, Format: disk.FormatRaw, Size: 1 << 20, Name: name,
		Metadata: meta, OnExists: glance.Reuse})
	if err != nil {
		t.Fatalf("upload after the token was revoked: %v", err)
	}
	if c.Provider.Token() == old {
		t.Fatal("the client still holds the revoked token")
	}
	if res.Checksum != testutil.SHA512File(t, file) {
		t.Fatalf("checksum %s", res.Checksum)
	}
	assertOnlyActive(t, "local", name, 1)
}
