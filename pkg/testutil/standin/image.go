package standin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/testutil"
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
	path, err := Build(context.Background(), opts)
	if errors.Is(err, ErrNeedsRoot) {
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
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := disk.CopySparse(context.Background(), out, in); err != nil {
		t.Fatalf("standin: copying %s: %v", src, err)
	}
	return dst
}
