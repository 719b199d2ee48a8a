package oem_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// A cancelled oem set says what it left: in place, that the image was not changed (and it was
// not); with an output file, that none was written (and none is there).
func TestSetFileCancelledSaysWhatWasLeft(t *testing.T) {
	testutil.RequireTools(t, "btrfs")
	img := flatcardisk.Build(t, flatcardisk.Options{})
	before := testutil.SHA256File(t, img)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts := oem.SetOptions{ID: "openstack"}

	_, err := oem.SetFile(ctx, img, oem.Output{}, opts)
	var ie *interrupt.Error
	if !errors.As(err, &ie) || len(ie.Leftovers) != 0 || !strings.Contains(ie.Clean, img+" was not changed") {
		t.Fatalf("in place: %v", err)
	}
	if testutil.SHA256File(t, img) != before {
		t.Fatal("a cancelled in-place edit changed the image")
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "out.qcow2")
	_, err = oem.SetFile(ctx, img, oem.Output{Path: out}, opts)
	if !errors.As(err, &ie) || len(ie.Leftovers) != 0 || !strings.Contains(ie.Clean, out+" was not written") {
		t.Fatalf("output file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a cancelled copy left files: %v", entries)
	}
}
