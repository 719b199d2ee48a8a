package glance_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
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
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Robust wait: the image record exists in Glance (the upload is under way), then Ctrl-C.
	deadline := time.After(3 * time.Minute)
	var err error
wait:
	for {
		select {
		case err = <-exited:
			t.Fatalf("upload ended before it was interrupted (%v):\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no image named %s appeared:\n%s", name, stderr.String())
		case <-time.After(50 * time.Millisecond):
			if len(imagesNamed(t, "local", name)) > 0 {
				cmd.Process.Signal(os.Interrupt)
				err = <-exited
				break wait
			}
		}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130:\n%s", err, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "nothing was left behind") || !strings.Contains(out, "no image was left") ||
		strings.Contains(out, "context canceled") {
		t.Fatalf("the message does not say what happened:\n%s", out)
	}
	if imgs := imagesNamed(t, "local", name); len(imgs) != 0 {
		t.Fatalf("%d image(s) named %s left in Glance (status %s)", len(imgs), name, imgs[0].Status)
	}
}
