package glance_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Ctrl-C in the middle of an upload to the real Glance: exit 130, the half-made image is deleted,
// and the message says exactly that (not a generic claim about an output path).
func TestInterruptedUploadLeavesNoImage(t *testing.T) {
	needOpenStack(t)
	name := uniqueName(t)
	img := rawImage(t, t.TempDir(), 11, 2<<30) // raw is sent whole: seconds of transfer to interrupt
	cmd := exec.Command(testutil.Binary(t), "upload", img, "--name", name, "--cloud", "local")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"OS_CLIENT_CONFIG_FILE=" + stack.env["OS_CLIENT_CONFIG_FILE"]}
	c := connect(t, "local")
	started, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() { // the image record exists in Glance: the upload is under way, time for Ctrl-C
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			pages, err := images.List(c.Image, images.ListOpts{Name: name}).AllPages(context.Background())
			if all, _ := images.ExtractImages(pages); err == nil && len(all) > 0 {
				close(started)
				return
			}
		}
	}()
	out := testutil.Interrupt(t, cmd, started, "an image named "+name+" in Glance")
	if !strings.Contains(out, "nothing was left behind") || !strings.Contains(out, "no image was left") ||
		strings.Contains(out, "context canceled") {
		t.Fatalf("the message does not say what happened:\n%s", out)
	}
	if imgs := imagesNamed(t, "local", name); len(imgs) != 0 {
		t.Fatalf("%d image(s) named %s left in Glance (status %s)", len(imgs), name, imgs[0].Status)
	}
}
