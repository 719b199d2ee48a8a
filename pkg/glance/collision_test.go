package glance_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
)

// uploadTogether starts one real upload process per file at the same moment, all with the same
// --name, and returns their results in the order of files.
func uploadTogether(t *testing.T, name string, files ...string) []testutil.Result {
	t.Helper()
	res := make([]testutil.Result, len(files))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i] = upload(t, nil, f, "--name", name, "--cloud", "local", "-o", "json")
		}()
	}
	close(start)
	wg.Wait()
	return res
}

// TestConcurrentUploadsLeaveOneImage: CAPO needs exactly one image per name, so two pipelines
// uploading one name at once must end with one. Same content: both succeed, one uploaded and the
// other reused it (its own copy, if it made one, removed). Different content: one succeeds, the
// other fails naming both IDs, and nothing of the loser's is left. Run several times: the two
// processes race differently each time (one may see the other's upload in flight and wait, or
// both may create their image before either lists).
func TestConcurrentUploadsLeaveOneImage(t *testing.T) {
	needOpenStack(t)
	a := rawImage(t, t.TempDir(), 31, 24<<20)
	b := rawImage(t, t.TempDir(), 32, 24<<20)
	for round := 0; round < 3; round++ {
		t.Run("same content", func(t *testing.T) {
			name := uniqueName(t)
			rs := uploadTogether(t, name, a, a)
			var actions []string
			for _, r := range rs {
				r.MustSucceed(t)
				var out []glance.Result
				if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil || len(out) != 1 {
					t.Fatalf("report %q: %v", r.Stdout, err)
				}
				actions = append(actions, out[0].Action)
			}
			imgs := assertOnlyActive(t, "local", name, 1)
			if !(strings.Contains(strings.Join(actions, " "), "uploaded") && strings.Contains(strings.Join(actions, " "), "reused")) {
				t.Errorf("actions %v, want one uploaded and one reused", actions)
			}
			if got := imgs[0].Properties["os_hash_value"]; got != testutil.SHA512File(t, a) {
				t.Errorf("the one image has hash %v", got)
			}
		})
		t.Run("different content", func(t *testing.T) {
			name := uniqueName(t)
			rs := uploadTogether(t, name, a, b)
			imgs := assertOnlyActive(t, "local", name, 1)
			winner := imgs[0].ID
			var ok, failed []testutil.Result
			for _, r := range rs {
				if r.Code == 0 {
					ok = append(ok, r)
				} else {
					failed = append(failed, r)
				}
			}
			if len(ok) != 1 || len(failed) != 1 {
				t.Fatalf("exit codes %d and %d, want one 0 and one 1:\n%s\n%s", rs[0].Code, rs[1].Code, rs[0].Combined(), rs[1].Combined())
			}
			failed[0].MustFail(t, 1, winner, "different content")
			if !strings.Contains(ok[0].Stdout, winner) {
				t.Errorf("the winner's report does not name the remaining image %s:\n%s", winner, ok[0].Stdout)
			}
		})
	}
}

// TestUploadWaitsForAnUploadInFlight: a queued image of this tool whose owner is alive on this
// host is another run's upload in flight, not a leftover: upload waits for it instead of deleting
// it, and gives up waiting after --wait with the image taken for a dead run's leftover.
func TestUploadWaitsForAnUploadInFlight(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	file := rawImage(t, t.TempDir(), 33, 4<<20)
	c := connect(t, "local")
	// A queued record owned by this test process (alive): what another run's create looks like.
	id := createQueued(t, c, name, glance.SelfOwner(t))
	r := upload(t, nil, file, "--name", name, "--cloud", "local", "--wait", "3s")
	r.MustSucceed(t)
	if !strings.Contains(r.Stderr, "another run is uploading") || !strings.Contains(r.Stderr, "taken for a dead run's leftover") {
		t.Errorf("upload did not say it waited for the upload in flight:\n%s", r.Stderr)
	}
	imgs := assertOnlyActive(t, "local", name, 1)
	if imgs[0].ID == id {
		t.Errorf("the queued image became the result")
	}
}

func createQueued(t *testing.T, c *glance.Cloud, name, owner string) string {
	t.Helper()
	img, err := images.Create(context.Background(), c.Image, images.CreateOpts{Name: name, ContainerFormat: "bare", DiskFormat: "raw",
		Tags: []string{glance.ToolTag}, Properties: map[string]string{glance.PropertyUploadOwner: owner}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { images.Delete(context.Background(), c.Image, img.ID) })
	return img.ID
}
