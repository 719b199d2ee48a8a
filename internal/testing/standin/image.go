package standin

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// Image is Build for tests: it returns the cached read-only raw disk (copy it before booting it
// writable), building it on first use, and fails the test when that is impossible.
func Image(t testing.TB, opts Options) string {
	t.Helper()
	testutil.RequireTools(t, Tools...)
	start := time.Now()
	if opts.Log == nil {
		opts.Log = t.Logf
	}
	path, err := build(context.Background(), opts)
	if errors.Is(err, errNeedsRoot) {
		testutil.RequireRoot(t, err.Error())
	}
	if err != nil {
		t.Fatalf("standin: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("standin: guest image ready in %s: %s", d.Round(time.Millisecond), path)
	}
	return path
}

// CopyImage returns a writable sparse copy (a reflink where the filesystem can) of a cached
// image in t.TempDir(), for a boot that may write to its disk.
func CopyImage(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := flatcardisk.CopySparse(src, dst); err != nil {
		t.Fatalf("standin: %v", err)
	}
	return dst
}
