package glance_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
)

// fakeRequest is an upload of a 1 MiB raw file (random first MiB, seeded) named name.
func fakeRequest(t *testing.T, name string, seed int64, mode glance.OnExists) (*glance.Request, []byte) {
	t.Helper()
	path := rawImage(t, t.TempDir(), seed, 1<<20)
	req := &glance.Request{Name: name, OnExists: mode, Wait: 30 * time.Second, Attempts: 2, Backoff: time.Millisecond,
		Metadata: glance.Metadata{Tags: []string{glance.ToolTag}, Properties: map[string]string{"os_distro": "flatcar"}}}
	if err := req.SetFile(path, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return req, data
}

func uploadFake(t *testing.T, req *glance.Request, clouds ...string) ([]*glance.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return glance.UploadAll(ctx, clouds, req)
}

// A new name: created, uploaded, verified by Glance's own sha512, active.
func TestFakeUpload(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	req, _ := fakeRequest(t, "flatcar", 1, glance.Reuse)
	res, err := uploadFake(t, req, "fake0")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Action != "uploaded" || res[0].Status != "active" || res[0].Size != 1<<20 || res[0].Properties["os_distro"] != "flatcar" {
		t.Fatalf("result %+v", res)
	}
	if got := f.Named("flatcar"); len(got) != 1 || got[res[0].ID] != "active" {
		t.Fatalf("images in the fake: %v", got)
	}
}

// Reuse: the same content under the same name is not sent again; different content is refused
// with the way out, and nothing is created or deleted.
func TestFakeReuse(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	req, data := fakeRequest(t, "flatcar", 2, glance.Reuse)
	id := f.Put("flatcar", "active", data, glance.ToolTag)
	res, err := uploadFake(t, req, "fake0")
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Action != "reused" || res[0].ID != id || f.Count("PUT ") != 0 || f.Count("POST /v2/images") != 0 {
		t.Fatalf("result %+v, calls %v", res[0], f.Calls())
	}

	other, _ := fakeRequest(t, "flatcar", 3, glance.Reuse)
	_, err = uploadFake(t, other, "fake0")
	if err == nil || !strings.Contains(err.Error(), "already exists ("+id+") with different content") || !strings.Contains(err.Error(), "--on-exists replace") {
		t.Fatalf("err %v", err)
	}
	if got := f.Named("flatcar"); len(got) != 1 || got[id] != "active" || f.Count("POST /v2/images") != 0 {
		t.Fatalf("after a refused reuse: %v, calls %v", got, f.Calls())
	}

	queued := f.Put("other", "queued", nil) // not ours (no tool tag), not active: refused, kept
	req, _ = fakeRequest(t, "other", 2, glance.Reuse)
	if _, err := uploadFake(t, req, "fake0"); err == nil || !strings.Contains(err.Error(), "status queued, not active") {
		t.Fatalf("reuse of a queued image: err %v", err)
	}
	if got := f.Named("other"); got[queued] != "queued" {
		t.Fatalf("someone else's queued image was touched: %v", got)
	}
}

// Replace: the new image is uploaded and verified first, then every older image of the name is
// deleted; a half-made leftover of an earlier run of this tool is removed before anything else.
func TestFakeReplace(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	req, _ := fakeRequest(t, "flatcar", 4, glance.Replace)
	old1 := f.Put("flatcar", "active", []byte("old one"), glance.ToolTag)
	old2 := f.Put("flatcar", "active", []byte("old two"))
	leftover := f.Put("flatcar", "saving", nil, glance.ToolTag)
	res, err := uploadFake(t, req, "fake0")
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Action != "replaced" || strings.Join(r.Replaced, ",") != old1+","+old2 || strings.Join(r.RemovedLeftovers, ",") != leftover {
		t.Fatalf("result %+v", r)
	}
	if got := f.Named("flatcar"); len(got) != 1 || got[r.ID] != "active" {
		t.Fatalf("images after replace: %v", got)
	}
}

// The data arrives damaged: Glance's hash differs from the file's. The upload fails saying so,
// is not retried as if transient, and the damaged image is deleted.
func TestFakeHashMismatch(t *testing.T) {
	f := glancetest.New(t)
	f.Damage(true)
	glancetest.CloudsYAML(t, f)
	req, _ := fakeRequest(t, "flatcar", 5, glance.Reuse)
	_, err := uploadFake(t, req, "fake0")
	if err == nil || !strings.Contains(err.Error(), "hash mismatch after upload") || !strings.Contains(err.Error(), "damaged on the way") ||
		!strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("err %v", err)
	}
	if got := f.Named("flatcar"); len(got) != 0 {
		t.Fatalf("the damaged image is still there: %v", got)
	}
	if n := f.Count("PUT "); n != 1 {
		t.Fatalf("%d uploads, want 1 (a hash mismatch is not transient)", n)
	}
}

// Several clouds at once: each gets its own result in the given order; one cloud failing does
// not hide the others' success, and its error names it.
func TestFakeUploadAllClouds(t *testing.T) {
	a, b, c := glancetest.New(t), glancetest.New(t), glancetest.New(t)
	b.Damage(true)
	glancetest.CloudsYAML(t, a, b, c)
	req, _ := fakeRequest(t, "flatcar", 6, glance.Reuse)
	res, err := uploadFake(t, req, "fake0", "fake1", "fake2")
	var cloudErrs glance.CloudErrors
	if !errors.As(err, &cloudErrs) || len(cloudErrs) != 1 || !strings.HasPrefix(cloudErrs[0].Error(), "fake1/RegionOne: ") || !strings.Contains(cloudErrs[0].Error(), "hash mismatch") {
		t.Fatalf("err %v", err)
	}
	if errors.Is(err, errs.ErrInvalid) {
		t.Fatal("a hash mismatch is not a config error")
	}
	if len(res) != 2 || res[0].Cloud != "fake0" || res[1].Cloud != "fake2" || res[0].Checksum != res[1].Checksum {
		t.Fatalf("results %+v", res)
	}
	for _, f := range []*glancetest.Cloud{a, c} {
		if len(f.Named("flatcar")) != 1 {
			t.Fatalf("%s: %v", f.URL, f.Named("flatcar"))
		}
	}
}

// countingSink counts the hashing passes over the file (labels "hash <cloud>").
type countingSink struct{ n *int }

func (s countingSink) Write(p []byte) (int, error) { return len(p), nil }
func (s countingSink) Add(int64)                   {}
func (s countingSink) Finish()                     {}

// A hash the caller already has (build's record step) is what the reuse check compares: the
// file is not read again, and a wrong one is a different content.
func TestFakeReuseTakesKnownHash(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	req, data := fakeRequest(t, "flatcar", 7, glance.Reuse)
	id := f.Put("flatcar", "active", data, glance.ToolTag)
	sum := sha512.Sum512(data)
	hashes := 0
	req.Progress = func(label string, total int64) progress.Reporter {
		if strings.HasPrefix(label, "hash ") {
			hashes++
		}
		return countingSink{&hashes}
	}
	req.KnownHash("sha512", hex.EncodeToString(sum[:]))
	res, err := uploadFake(t, req, "fake0")
	if err != nil || res[0].Action != "reused" || res[0].ID != id {
		t.Fatalf("res %+v, err %v", res, err)
	}
	if hashes != 0 {
		t.Fatalf("the file was hashed %d time(s) despite the known hash", hashes)
	}
	wrong, _ := fakeRequest(t, "flatcar", 7, glance.Reuse)
	wrong.KnownHash("sha512", strings.Repeat("0", 128))
	if _, err := uploadFake(t, wrong, "fake0"); err == nil || !strings.Contains(err.Error(), "different content") {
		t.Fatalf("a wrong known hash: err %v", err)
	}
}

// --on-exists replace right after the first upload: Glance's created_at has one-second
// resolution, so the image being replaced and the new one may carry the same time. The image a
// run set out to replace is never its rival: the new one stays, the old one goes (CI saw the
// old rule keep the old image, delete the new one and fail).
func TestFakeReplaceWithinOneSecond(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	f.CreatedInOneSecond(true)
	first, _ := fakeRequest(t, "flatcar", 1, glance.Reuse)
	res, err := uploadFake(t, first, "fake0")
	if err != nil {
		t.Fatal(err)
	}
	oldID := res[0].ID
	second, _ := fakeRequest(t, "flatcar", 2, glance.Replace)
	res, err = uploadFake(t, second, "fake0")
	if err != nil {
		t.Fatalf("replace within one second: %v", err)
	}
	if res[0].Action != "replaced" || res[0].ID == oldID || len(res[0].Replaced) != 1 || res[0].Replaced[0] != oldID {
		t.Fatalf("result %+v, want the new image replacing %s", res[0], oldID)
	}
	if got := f.Named("flatcar"); len(got) != 1 || got[res[0].ID] != "active" {
		t.Fatalf("images in the fake: %v, want only %s", got, res[0].ID)
	}
}

// Another project's images of the name (public, shared, or any with an admin token) are never
// replaced, reused or removed as leftovers, and the user hears that CAPO would see them too.
// Before, replace tried to delete another project's public image after uploading (403: exit 1),
// and with an admin token would have deleted it.
func TestReplaceLeavesOtherProjectsNamesakesAlone(t *testing.T) {
	f := glancetest.New(t)
	glancetest.CloudsYAML(t, f)
	file := rawImage(t, t.TempDir(), 46, 1<<20)
	public := f.PutFor(map[string]any{"owner": "p2", "visibility": "public"}, "flatcar", "active", []byte("theirs"), glance.ToolTag)
	shared := f.PutFor(map[string]any{"owner": "p3", "visibility": "shared"}, "flatcar", "saving", nil, glance.ToolTag)
	own := f.Put("flatcar", "active", []byte("ours, older"))

	r := uploadCLI(t, file, "flatcar", glance.Replace)
	id := reportedID(t, r)
	if !strings.Contains(r.Stderr, "other projects' images are named \"flatcar\"") || !strings.Contains(r.Stderr, public) || !strings.Contains(r.Stderr, "--image-id") {
		t.Errorf("no warning naming the other projects' image %s:\n%s", public, r.Stderr)
	}
	left := f.Named("flatcar")
	if left[public] != "active" || left[shared] != "saving" {
		t.Errorf("another project's image was touched: Glance holds %v (theirs: %s, %s)", left, public, shared)
	}
	if _, ok := left[own]; ok || left[id] != "active" || len(left) != 3 {
		t.Errorf("Glance holds %v, want our new %s beside the other projects' two, our older %s replaced", left, id, own)
	}
}
