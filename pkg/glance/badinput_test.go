package glance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Every bad input that reaches a cloud: a clear message, its exit code, no credentials in the
// output, and nothing half-made left in Glance. (Usage errors, decided before any cloud is
// contacted, are in usage_test.go.)
func TestBadInputs(t *testing.T) {
	needOpenStack(t)
	dir := t.TempDir()
	img := rawImage(t, dir, 7, 1<<20)
	cases := []struct {
		name  string
		env   []string
		args  []string
		code  int
		want  []string
		cloud string // where to check that no image of that name exists
	}{
		{"wrong password", nil, []string{img, "--cloud", "local-badpass"}, 1, []string{"HTTP 401", "check the user name, password"}, "local"},
		{"no image service", nil, []string{img, "--cloud", "local-noimage"}, 1, []string{"no image (Glance) endpoint in RegionThree"}, "local"},
		{"glance unreachable", nil, []string{img, "--cloud", "local-down"}, 1, []string{"Glance is unreachable", "connection refused"}, "local"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own image name and touches no shared state
			name := uniqueName(t)
			args := append(c.args, "--name", name, "--wait", "1m")
			r := upload(t, c.env, args...).MustFail(t, c.code, c.want...)
			if strings.Contains(r.Combined(), "wrong-"+stack.password) {
				t.Fatalf("the wrong password appears in the output:\n%s", r.Combined())
			}
			if c.cloud != "" {
				assertOnlyActive(t, c.cloud, name, 0)
			}
		})
	}
}

// A name that already matches several images is refused (CAPO needs exactly one), and replace
// brings it back to one.
func TestSeveralImagesWithTheName(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	c := connect(t, "local")
	for range 2 {
		if _, err := images.Create(context.Background(), c.Image, images.CreateOpts{Name: name, DiskFormat: "raw", ContainerFormat: "bare"}).Extract(); err != nil {
			t.Fatal(err)
		}
	}
	img := rawImage(t, t.TempDir(), 8, 1<<20)
	upload(t, nil, img, "--name", name, "--cloud", "local").MustFail(t, 1, "2 images are named", "CAPO needs exactly one", "--on-exists replace")
	if n := len(imagesNamed(t, "local", name)); n != 2 {
		t.Fatalf("%d images named %q after a refused upload, want the 2 that were there", n, name)
	}
	r := upload(t, nil, img, "--name", name, "--cloud", "local", "--on-exists", "replace").MustSucceed(t)
	if !strings.Contains(r.Stderr, "CAPO needs exactly one") {
		t.Errorf("no warning about several images:\n%s", r.Stderr)
	}
	assertOnlyActive(t, "local", name, 1)
}

// Glance killed in the middle of an upload: the error says so; once Glance is back, the next run
// removes the leftover and succeeds.
func TestGlanceStoppedMidUpload(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	// Big enough (sparse, so cheap here) that the upload lasts long enough to be interrupted.
	img := rawImage(t, t.TempDir(), 9, 3<<30)
	done := make(chan struct{})
	var res testutil.Result
	go func() {
		defer close(done)
		res = upload(t, nil, img, "--name", name, "--cloud", "local-two")
	}()
	waitForStatus(t, "local-two", name, images.ImageStatusSaving, done)
	if err := (&testutil.OpenStack{Dir: stack.dir}).StopGlance("two"); err != nil {
		t.Fatal(err)
	}
	<-done
	res.MustFail(t, 1, "stopped answering during the upload", "the next run of upload with this name removes")
	if msg := res.Stderr[strings.LastIndex(res.Stderr, "Error:"):]; !strings.Contains(msg, "the next run of upload with this name removes") {
		t.Fatalf("the final error does not say the leftover will be removed: %s", msg)
	}

	if err := (&testutil.OpenStack{Dir: stack.dir}).StartGlance("two"); err != nil {
		t.Fatal(err)
	}
	left := imagesNamed(t, "local-two", name)
	if len(left) != 1 || left[0].Status == images.ImageStatusActive {
		t.Fatalf("expected one half-made image after Glance died, got %+v", left)
	}
	small := rawImage(t, t.TempDir(), 10, 1<<20)
	r := upload(t, nil, small, "--name", name, "--cloud", "local-two").MustSucceed(t)
	if !strings.Contains(r.Stderr, "removed leftover image "+left[0].ID) {
		t.Fatalf("the output does not say the leftover was removed:\n%s", r.Stderr)
	}
	assertOnlyActive(t, "local-two", name, 1)
}

// waitForStatus polls until an image of that name reaches status, or the upload ended.
func waitForStatus(t *testing.T, cloud, name string, status images.ImageStatus, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatal("the upload ended before it could be interrupted")
		default:
		}
		for _, img := range imagesNamed(t, cloud, name) {
			if img.Status == status {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no image %q reached status %s", name, status)
}
